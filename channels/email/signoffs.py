"""A rejection's reason without the writer's sign-off, so the agent reads the reason only.

People close a reply the way they close any mail: "Thanks,\\nAlice", "Mit freundlichen
Grüßen", "Med venlig hilsen\\nAnders", "以上、よろしくお願いいたします", or just their name
and a signature block under a blank line. None of it is part of the reason. Two rules:

- a closing phrase (the table below, in the languages mail is most often written in) ends
  the reason: a short line that starts with one and opens a paragraph after the first, or
  a line near the end of the first that is only the phrase and perhaps a name;
- trailing paragraphs after the first whose lines are all short and unpunctuated, the last
  of them starting with something shaped like a name ("Eva", "-Abhishek Kona",
  "Mag. Eva Musterfrau"), are a signature.

The first paragraph, where the reason is, always stays.
"""

from __future__ import annotations

import re

__all__ = ["without_sign_off"]

_CLOSINGS = (
    # en
    "thanks", "thank you", "thx", "ty", "cheers", "best", "best wishes", "all the best",
    "regards", "kind regards", "best regards", "warm regards", "br", "greetings",
    "sincerely", "yours", "yours sincerely", "yours truly", "take care",
    # de
    "gruß", "grüße", "grüßle", "gruss", "grüsse", "viele grüße", "liebe grüße",
    "beste grüße", "herzliche grüße", "freundliche grüße", "freundliche grüsse",
    "mit freundlichen grüßen", "mit freundlichen grüssen", "mfg", "lg", "vg", "danke",
    "glück auf", "servus", "tschüss",
    # fr, es, pt, it
    "merci", "cordialement", "bien cordialement", "bien à vous", "salutations",
    "saludos", "salud", "un saludo", "atentamente", "gracias", "atenciosamente",
    "abraços", "cumprimentos", "obrigado", "obrigada", "cordiali saluti", "saluti",
    "distinti saluti", "grazie",
    # nl, da, no, sv, fi
    "met vriendelijke groet", "vriendelijke groet", "groeten", "groetjes", "mvg", "mvh",
    "med venlig hilsen", "venlig hilsen", "hilsen", "med vennlig hilsen", "vennlig hilsen",
    "med vänliga hälsningar", "vänliga hälsningar", "hälsningar", "terveisin",
    "ystävällisin terveisin", "kiitos",
    # pl, cs, hu, tr, ro, el, ru, uk
    "pozdrawiam", "z poważaniem", "s pozdravem", "děkuji", "üdvözlettel", "köszönöm",
    "saygılarımla", "teşekkürler", "cu stimă", "mulțumesc", "με εκτίμηση", "ευχαριστώ",
    "с уважением", "спасибо", "всего доброго", "з повагою", "дякую",
    # ja, zh, ko, ar, he
    "以上", "よろしくお願い", "敬具", "此致", "谢谢", "謝謝", "감사합니다", "شكرا",
    "مع تحياتي", "תודה",
)  # fmt: skip
_CLOSING = re.compile(
    "|".join(re.escape(c) for c in sorted(_CLOSINGS, key=len, reverse=True)), re.IGNORECASE
)
_LEAD = " \t-–—/*>"
_SENTENCE_END = tuple(".?!;:…。？！")
_SHORT_CHARS = 40
_SHORT_WORDS = 5


def _closing(line: str) -> bool:
    """The line starts with a closing phrase ("Viele Grüße", "LG, Eva", "/ Greetings")."""
    text = line.strip(_LEAD)
    found = _CLOSING.match(text)
    if found is None:
        return False
    after = text[found.end() :][:1]
    # A whole word ("Bestellung" is not "Best"), or glued to a name ("GrüßeIngo").
    return not after or not after.isalpha() or (after.isupper() and not found.group().isupper())


def _closing_line(line: str) -> bool:
    """The whole line is a closing: the phrase, punctuation, at most a name ("Thanks, Alice")."""
    text = line.strip(_LEAD)
    found = _CLOSING.match(text)
    if found is None or not _closing(line):
        return False
    after = text[found.end() :].strip(" ,.!")
    return not after or _name_like(after)


def _closing_opening(line: str) -> bool:
    """A short line that starts or ends with a closing phrase opens the sign-off paragraph:
    "Bien à vous,", "merci d'avance", "Mit kräftigem "Glück Auf"" (not "Thanks to the new
    policy we cannot send it")."""
    text = line.strip()
    if len(text) > _SHORT_CHARS:
        return False
    if _closing(text):
        return True
    words = [w.strip("\"'“”„«».,!") for w in text.split()]
    return any(_closing_line(" ".join(words[-n:])) for n in range(1, min(4, len(words)) + 1))


def _short(line: str) -> bool:
    text = line.strip()
    return (
        len(text) <= _SHORT_CHARS
        and len(text.split()) <= _SHORT_WORDS
        and (not text.endswith(_SENTENCE_END))
    )


def _name_like(line: str) -> bool:
    """One to three words, the first and last capitalised: "Eva", "Michael Scott"."""
    words = line.strip(_LEAD).split()
    if not 1 <= len(words) <= 3:
        return False
    return all(w[:1].isupper() or (w[:1].isalpha() and w[:1] == w[:1].lower() == w[:1].upper())
               for w in (words[0], words[-1]))  # fmt: skip


def _paragraphs(text: str) -> list[list[str]]:
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for line in text.split("\n"):
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs


def without_sign_off(text: str) -> str:
    """`text` (a reason) without the closing phrase, name and signature that end it."""
    paragraphs = _paragraphs(text)
    if not paragraphs:
        return ""
    first, rest = paragraphs[0], paragraphs[1:]
    # A closing line near the end of the first paragraph: "…\nThanks,\nAlice".
    for i in range(len(first) - 1, max(len(first) - 4, -1), -1):
        if _closing_line(first[i]) and all(_short(x) for x in first[i + 1 :]):
            first = first[:i]
            break
    cut = len(rest)
    for n, paragraph in enumerate(rest):
        if _closing_opening(paragraph[0]):
            cut = n
            break
    # Above the closing (or at the end): the name and signature block, "Eva\n\nMag. Eva M…".
    while cut > 0 and _name_like(rest[cut - 1][0]) and all(_short(x) for x in rest[cut - 1]):
        cut -= 1
    keep = [first, *rest[:cut]]
    return "\n\n".join("\n".join(p) for p in keep).strip()
