"""Where a reply's quoted mail begins and where the writer's signature stands, in any language.

A reply carries the person's answer above (sometimes below) the mail it answers, and only
the answer may decide anything. Mail clients mark the quote in a handful of shapes, each
written in the user's language:

- `>` at the start of each quoted line;
- an attribution line, "On <date>, <name> <address> wrote:", which clients translate
  ("Le … a écrit :", "Am … schrieb …:", "W dniu … napisał:", "… пользователь … написал:"),
  reorder ("<name> schrieb am <date>:"), shorten ("<date>, <name> <address>:") and wrap
  over two to four lines; it is recognised by its shape: it ends with ":" or with the verb,
  and has two of an address, a date or time, and a word for "wrote";
- a header block as Outlook writes it, "From: / Sent: / To: / Subject:", translated
  ("De : / Envoyé le :", "Gesendet: / Von:", "发件人: / 发送时间:"): two or more header
  names, one of them the sender or the date;
- a separator: a rule ("________", "-----", "====") or a phrase between dashes
  ("-----Original Message-----", "-------- Message d'origine --------").

Mobile clients add a "sent from" line ("Gesendet von Outlook für Android", "Envoyé de mon
iPhone", "Sent from Proton Mail"), which ends the answer too. The tables hold words only
(header names, verbs, "sent from" phrases), never whole lines of a particular mail.
"""

from __future__ import annotations

import re

__all__ = ["is_quote_start", "is_signature", "own_text"]

# Marks that set the direction of Arabic or Hebrew text, invisible but present in the lines.
_BIDI = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
# Emphasis an HTML-to-text step or a client leaves around header names: "*From:*", "** De :".
_DECOR = " \t*_"

# --- header blocks -----------------------------------------------------------------------

_SENDER = (
    "from", "von", "de", "van", "da", "fra", "från", "frá", "od", "от", "від", "kimden",
    "feladó", "lähettäjä", "από", "发件人", "寄件人", "寄件者", "差出人", "보낸 사람", "من",
    "expéditeur", "absender", "mittente", "afzender", "nadawca", "odesílatel", "remitente",
    "saatja", "siuntėjas", "pengirim", "dari", "người gửi",
)  # fmt: skip
_DATE = (
    "sent", "date", "message du", "gesendet", "datum", "envoyé", "envoyé le", "envoye", "enviado", "enviado el",
    "enviada em", "fecha", "inviato", "data", "verzonden", "verstuurd", "sendt", "skickat",
    "dato", "wysłano", "wysłane", "odesláno", "отправлено", "дата", "надіслано",
    "gönderildi", "gönderilme", "tarih", "elküldve", "dátum", "lähetetty", "päivämäärä",
    "στάλθηκε", "ημερομηνία", "发送时间", "時間", "日期", "送信日時", "日付", "보낸 날짜",
    "تم الإرسال", "التاريخ", "הוא נשלח", "תאריך",
)  # fmt: skip
_OTHER = (
    # To, Cc, Subject, Reply-To
    "to", "an", "à", "a", "para", "aan", "til", "till", "do", "кому", "kime", "címzett",
    "vastaanottaja", "προς", "收件人", "收件者", "宛先", "받는 사람", "إلى", "אל", "cc", "kopie",
    "copie", "copie à", "kopia", "копия", "subject", "betreff", "objet", "sujet", "asunto",
    "oggetto", "onderwerp", "emne", "ämne", "temat", "předmět", "тема", "konu", "tárgy",
    "aihe", "θέμα", "主题", "主旨", "件名", "제목", "الموضوع", "נושא", "assunto", "risposta",
    "reply-to", "antwort an",
)  # fmt: skip


def _label_pattern(names: tuple[str, ...]) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


_HEADER = re.compile(
    rf"^(?:(?P<sender>{_label_pattern(_SENDER)})|(?P<date>{_label_pattern(_DATE)})|"
    rf"(?P<other>{_label_pattern(_OTHER)}))\s*[:：]",
    re.IGNORECASE,
)


def _header_kind(line: str) -> str | None:
    """'sender', 'date' or 'other' for a header line as a client quotes it, else None."""
    text = _BIDI.sub("", line).strip(_DECOR)
    found = _HEADER.match(text)
    if found is None or text[:1].islower():
        # Clients write header names capitalised; "to: bob@x" is an edit line, not a header.
        return None
    return found.lastgroup


def _header_block_at(lines: list[str], i: int) -> bool:
    """Lines i… are a quoted header block: starting with the sender or the date, and at
    least one more header name within the next few lines. Clients set the block apart
    with a blank line or a rule; straight under a line of text (where an edit's
    "Subject: …" lines could stand) it must name both the sender and the date."""
    first = _header_kind(lines[i])
    if first not in {"sender", "date"}:
        return False
    kinds = {first}
    loose = 0  # a long value wraps onto a line of its own ("From: Human Resources\n<hr@x>")
    for line in lines[i + 1 : i + 7]:
        if not line.strip():
            continue
        kind = _header_kind(line)
        if kind is None:
            loose += 1
            if loose > 2:
                break
            continue
        kinds.add(kind)
    if i == 0 or not lines[i - 1].strip() or _is_separator(lines[i - 1]):
        return len(kinds) >= 2
    return {"sender", "date"} <= kinds


# --- attribution lines -------------------------------------------------------------------

_WROTE = (
    "wrote", "writes", "schrieb", "schreef", "a écrit", "escribió", "escribio", "escreveu",
    "ha scritto", "scrisse", "skrev", "kirjoitti", "napsal", "napsala", "napisał", "napisała",
    "napisał(a)", "написал", "написала", "написал(а)", "написав", "έγραψε",
    "írta", "a scris", "yazdı", "kirjutas", "rašė", "rakstīja", "写道", "寫道", "كتب",
    "כתב", "menulis", "đã viết", "wrote on",
)  # fmt: skip
_VERB = re.compile(rf"(?<!\w)(?:{_label_pattern(_WROTE)})(?!\w)", re.IGNORECASE)
_ADDRESS = re.compile(r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+|<[^<>\s]+@[^<>\s]*")
_DATE_OR_TIME = re.compile(
    r"\d{1,2}[:.h]\d{2}\b"  # 14:20, 18.30, 10h30
    r"|(?<!\d)(?:19|20)\d{2}(?!\d)"  # a year
    r"|\d{1,4}[/.\-]\d{1,2}[/.\-]\d{1,4}"  # 6/16/2016, 02.04.2012
    r"|\d+\s*[年月日]"
)
# A line that opens a wrapped attribution: a name before "<address>" on the next line.
_OPENS = re.compile(r"[<(\",]\s*$")
_ATTRIBUTION_END = re.compile(rf"(?:[:：]|(?:{_label_pattern(_WROTE)}))$", re.IGNORECASE)
_MAX_ATTRIBUTION = 300


def _is_attribution(text: str) -> bool:
    text = _BIDI.sub("", text).strip()
    # Zoho and Yahoo write "---- On … wrote ----"; a dash list item "- Le … a écrit :".
    text = text.strip("-—=* \t")
    if not text or len(text) > _MAX_ATTRIBUTION or not _ATTRIBUTION_END.search(text):
        return False
    features = (
        bool(_ADDRESS.search(text)),
        bool(_DATE_OR_TIME.search(text)),
        bool(_VERB.search(text)),
    )
    return sum(features) >= 2


_LOOSE_DATE = re.compile(r"\b[^\W\d_]{3,}\.?,?\s+\d{1,2}\b|\b\d{1,2}\.?\s+[^\W\d_]{3,}")


def _belongs(first: str, second: str, rest: str) -> bool:
    """Whether line `first` starts a wrapped attribution whose other lines (`second` the
    next of them, `rest` all of them) would be an attribution without it. It does when it
    ends in the middle of a name ("John Doe (" or "<"), or brings a date ("On Wed, Dec 9,
    Mister Example") that the next line goes on from (starting with the address or in
    lower case, or with no date or address of its own). A reason's last line right above
    a whole attribution does not, even when it names a date or an address."""
    # Every line given here is part of an attribution of at most _MAX_ATTRIBUTION
    # characters, so these searches stay short.
    if not _is_attribution(rest) or _OPENS.search(first):
        return True
    if not (_DATE_OR_TIME.search(first) or _LOOSE_DATE.search(first)):
        return False
    return (
        second.startswith(("<", "("))
        or second[:1].islower()  # "Am 26.5.2017\num 12:00 schrieb Adam"
        or not (_DATE_OR_TIME.search(second) or _ADDRESS.search(second))
    )


def _attribution_at(lines: list[str], i: int) -> bool:
    """An attribution starts at line i, on up to four lines. It may be cut by blank lines
    only before a line that starts with the address ("Some One\n\n<\nmailto:…> wrote:",
    as HTML-to-text steps leave it); the last part may have been quoted ("> wrote:")."""
    chunk = [lines[i].strip()]
    j = i + 1
    while True:
        if _is_attribution(" ".join(chunk)):
            return len(chunk) == 1 or _belongs(chunk[0], chunk[1], " ".join(chunk[1:]))
        if len(chunk) == 4:
            return False
        k = j
        while k < len(lines) and not lines[k].strip() and k - j < 2:
            k += 1
        if k >= len(lines) or not lines[k].strip():
            return False
        if k > j and not lines[k].lstrip().startswith(("<", "(")):
            return False
        chunk.append(lines[k].strip().lstrip(">").strip())
        j = k + 1


# Gmail in some languages: "2013/7/20 Name <address>" with no colon.
_DATED_ADDRESS = re.compile(r"^\s*\d{4}[/.\-]\d{1,2}[/.\-]\d{1,2}\b.{0,200}<[^<>\s]+@[^<>\s]+>\s*$")

# --- separators --------------------------------------------------------------------------

_RULE = re.compile(r"^\s*(?:[-_=*~]\s?){4,}$")
# "-----Original Message-----", "-----Original-Nachricht-----", "---- Forwarded ----"
_PHRASE_RULE = re.compile(r"^\s*[-=_]{3,}\s*[^\W\d_](?:[^\d\-=_]|-(?!-)){0,60}?\s*[-=_]{3,}")
_FORWARDED = re.compile(r"^\s*(?:begin forwarded message|début du message réexpédié)\s*:", re.I)


def _is_separator(line: str) -> bool:
    return bool(_RULE.match(line) or _PHRASE_RULE.match(line) or _FORWARDED.match(line))


def is_quote_start(lines: list[str], i: int) -> bool:
    """The quoted mail begins at lines[i]."""
    line = lines[i]
    if line.lstrip().startswith(">"):
        return True
    if not line.strip():
        return False
    if _is_separator(line) or _header_block_at(lines, i) or _DATED_ADDRESS.match(line):
        return True
    if _attribution_at(lines, i):
        return True
    # Any other attribution ("* Bob <bob@x> [2026-11-30]:", "Bob wrote:") right above a
    # `>` quote.
    if line.rstrip().endswith(":") and ("@" in line or _VERB.search(line)):
        following = [nxt for nxt in lines[i + 1 : i + 3] if nxt.strip()]
        return bool(following) and following[0].lstrip().startswith(">")
    return False


# --- signatures --------------------------------------------------------------------------

# "Sent from my iPhone", "Gesendet von Outlook für Android", "Envoyé à partir de Outlook
# pour iOS", "Von meinem iPhone gesendet", "iPhoneから送信", "Get Outlook for iOS".
_SENT_FROM = (
    "sent from", "sent via", "sent with", "sent using", "sent by", "get outlook for",
    "gesendet von", "gesendet mit", "gesendet vom", "von meinem", "outlook für",
    "envoyé de", "envoyé depuis", "envoyé à partir de", "envoyé avec", "obtenir outlook pour",
    "enviado desde", "enviado con", "enviado do", "enviado de", "obtener outlook para",
    "inviato da", "scarica outlook per", "verzonden vanaf", "verzonden met", "verstuurd vanaf",
    "verstuurd met", "verzonden vanuit", "verstuurd vanuit", "skickat från", "hämta outlook för", "sendt fra", "hent outlook til",
    "wysłane z", "wysłano z", "odesláno z", "отправлено с", "отправлено из", "lähetetty",
    "küldve", "gönderildi", "أرسلت من", "发自", "从我的", "から送信", "에서 보냄",
)  # fmt: skip


def _phrase(words: str) -> str:
    # A whole word in alphabets with spaces; in Chinese and Japanese the next word is glued.
    return re.escape(words) + ("" if ord(words[-1]) >= 0x2E80 else r"(?!\w)")


_SIGNATURE = re.compile(
    r"^\s*(?:-- ?$|"
    + "|".join(_phrase(p) for p in sorted(_SENT_FROM, key=len, reverse=True))
    + r"|\S.{0,40}(?:から送信|에서 보냄|发送)\s*$)",
    re.IGNORECASE,
)
_MAX_SIGNATURE = 100
# Arabic vowel marks, written or not at the writer's choice ("أُرسلت" is "أرسلت").
_HARAKAT = re.compile("[\u064b-\u065f\u0670]")


def is_signature(lines: list[str], i: int) -> bool:
    """A signature starts at lines[i]: the delimiter "-- ", or a mobile client's "sent
    from" line that stands apart from the text above it (a reason may say "Sent from the
    wrong account" on its second line)."""
    text = _HARAKAT.sub("", _BIDI.sub("", lines[i]))
    if len(text.strip()) > _MAX_SIGNATURE or not _SIGNATURE.match(text):
        return False
    return text.startswith("--") or i == 0 or not lines[i - 1].strip()


# --- the answer --------------------------------------------------------------------------


def _strip_blank(lines: list[str]) -> str:
    return "\n".join(lines).strip("\n").strip()


def own_text(text: str) -> str:
    """What the person wrote above the quoted mail and their signature.

    A bottom-posted reply (quote first, answer below) has nothing above the quote; then the
    first unquoted block after the quote is the answer.
    """
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    top: list[str] = []
    quote_at: int | None = None
    for i, line in enumerate(lines):
        if is_signature(lines, i):
            return _strip_blank(top)
        if is_quote_start(lines, i):
            quote_at = i
            break
        top.append(line)
    if _strip_blank(top) or quote_at is None:
        return _strip_blank(top)
    # Bottom-posting is a `>`-quote habit; below an Outlook header block is only more quote.
    rest = lines[quote_at:]
    head: list[str] = []
    while rest and not rest[0].lstrip().startswith(">"):
        line = rest[0].strip()
        # Each line above the `>` quote starts a quote, or ends a wrapped attribution.
        wraps = head and _is_attribution(" ".join([*(part for part in head if part), line]))
        if line and not is_quote_start(rest, 0) and not wraps:
            return ""
        head.append(rest.pop(0).strip())
    # "> wrote:" that ends a wrapped attribution is still the attribution, not a quote.
    attribution = " ".join(part for part in head if part)
    ends_it = rest and f"{attribution} {rest[0].lstrip('> ').strip()}"
    if ends_it and attribution and not _is_attribution(attribution) and _is_attribution(ends_it):
        rest.pop(0)
        while rest and not rest[0].strip():
            rest.pop(0)
        if not rest or not rest[0].lstrip().startswith(">"):
            return ""
    below: list[str] = []
    for n, line in enumerate(rest):
        if line.lstrip().startswith(">") and not below:
            continue
        if not below and not line.strip():
            continue
        if line.lstrip().startswith(">") or is_signature(rest, n) or is_quote_start(rest, n):
            break
        below.append(line)
    return _strip_blank(below)
