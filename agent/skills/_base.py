"""The base of every model of a skill file: an unknown key is refused (so a misspelt key is
an error, not a silent default) and a loaded skill cannot be changed in place."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
