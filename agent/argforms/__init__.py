"""Tool arguments as form fields, and form input back as checked tool arguments.

An action item carries a tool's JSON input schema and the arguments the model proposed. To
*edit* them, a person needs a form: an HTML form on the web page, a modal in Slack, or
``name: value`` lines in an email reply. All three channels share this one translation so
that a value typed anywhere is coerced and checked the same way, and the engine validates
API edits (JSON) with the very same rules:

- :func:`form_fields` turns a schema (pydantic/MCP style, with local ``$ref``s) and the
  current arguments into a flat list of :class:`Field`. Nested objects become dotted names
  (``address.city``); a choice may title its options (``oneOf`` of ``const`` + ``title``),
  and a list of choices is a ``multiselect``; other arrays, free-form objects, unions and
  unknown types become JSON fields.
- :func:`field_name` and :func:`field_path` are that naming and its inverse; a dot inside one
  property's own name is written ``\\.``.
- :func:`coerce_form` turns submitted strings back into typed arguments and validates them,
  returning human messages keyed by field name (``""`` for errors tied to no field).
- :func:`validate_arguments` is that validation alone, for arguments that arrive as JSON.
- :func:`chosen` reads the options a multiple-choice field has chosen.
- :func:`loads_json` reads JSON arguments with numbers bounded, for text from a model, a form
  or a mail; :func:`loads_body` reads a whole HTTP body so, naming each refused number's place.

Pure functions: no I/O. Two rules are stricter than JSON Schema on purpose, because
arguments come from people and models: numbers are bounded (see ``numbers``) and a field the
schema does not declare is refused (see ``unknown``).

The modules, each leaning only on those before it:

- ``names``: field names and their escaping.
- ``schema_walk``: the schema as a tree of inputs (``$ref``, ``allOf``, ``X | None``).
- ``fields``: the prefilled form.
- ``numbers``: bounded number text and JSON.
- ``unknown``: fields the schema does not declare.
- ``schema_shape``: schemas and arguments nested too deep, and ``$ref`` cycles.
- ``messages``: validation errors in words, placed on their field.
- ``validate``: the check itself.
- ``coerce``: submitted text back to arguments.
"""

from pizzabot.agent.argforms.coerce import coerce_form
from pizzabot.agent.argforms.fields import Field, chosen, form_fields
from pizzabot.agent.argforms.names import field_name, field_path
from pizzabot.agent.argforms.numbers import (
    MAX_INTEGER_DIGITS,
    MAX_NUMBER_TEXT,
    NumbersOutOfRange,
    bounded_decoder,
    loads_body,
    loads_json,
)
from pizzabot.agent.argforms.schema_shape import MAX_NESTING
from pizzabot.agent.argforms.schema_walk import FieldKind
from pizzabot.agent.argforms.validate import validate_arguments

__all__ = [
    "MAX_INTEGER_DIGITS",
    "MAX_NESTING",
    "MAX_NUMBER_TEXT",
    "Field",
    "FieldKind",
    "NumbersOutOfRange",
    "bounded_decoder",
    "chosen",
    "coerce_form",
    "field_name",
    "field_path",
    "form_fields",
    "loads_body",
    "loads_json",
    "validate_arguments",
]
