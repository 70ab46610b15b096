"""Whether a shell command line runs a given command: the `runs` operator of a skill's rules.

A rule written as a regular expression on a command's text (`rm -rf /`) is dodged by what a
shell reads the same way: `rm -fr /`, `rm -r -f /`, `rm  -rf /`, `/bin/rm -rf /`,
`sudo rm -rf /`, `rm -rf -- /`, `rm -rf /*`, `r\\m -rf /`, `ls; rm -rf /`, `$(rm -rf /)`.
So `runs: rm -r /` reads the value as a shell would, far enough to find each command it
runs, and asks of each whether it is that program with at least those flags and arguments.

Reading a command line fully needs the shell itself (variables, aliases, `eval`, a script
that writes a script), so this reading is sound in one direction only: where it cannot tell,
it says "maybe", which a `deny` or `ask` rule counts as a match (`pizzabot.agent.policy.rules`), and a
`runs` condition cannot decide `auto` at all. What it reads:

- the line is split with `shlex` (quotes and backslashes as the shell takes them) into simple
  commands at `;`, `&`, `&&`, `|`, `||`, parentheses and new lines, with redirections left
  out; a word holding a command line of its own (`bash -c 'rm -rf /'`, `"$(rm -rf /)"`,
  backquotes) is read as one too. Text `shlex` cannot split (an open quote) is a maybe;
- a simple command's program is its first word after `VAR=value` assignments and shell
  keywords, compared by its last path part (`/bin/rm` is `rm`). After a program that runs
  another (`sudo`, `env`, `command`, `exec`, `nohup`, `nice`, `timeout`, `xargs`, `find`,
  a shell, …) every later word may be the program;
- flags: `-rf`, `-fr` and `-r -f` are the same letters; a long flag counts as its own name
  and, as a maybe, as its first letter (`--recursive` for `-r`, `--force` for `-f`; GNU
  tools take any unambiguous prefix too); after `--` everything is an argument;
- arguments are compared as paths where the rule's argument is one: `/`, `//`, `/.` and
  `/tmp/..` are `/`; a glob (`/*`, `/r?ot`) or a relative path (`.`, `../..`, `*`, whose
  place depends on where the command runs) that may name it is a maybe;
- a word with `$` or a backquote (a variable, a command substitution) or a brace expansion
  may be any words at all: a maybe for the program, each flag and each argument. So is an
  argument `xargs` or `find -exec` fills in;
- letters that differ only by case or Unicode form (`RM`, full-width `ｒｍ`) are a maybe;
- a line too long, or nesting too deep, to read in good time is a maybe.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["Command", "Truth", "fold", "parse_command", "runs"]


class Truth(IntEnum):
    """Three-valued: `and` is `min`, `or` is `max`, `not` is `YES - x`."""

    NO = 0
    MAYBE = 1
    YES = 2


#: Programs that run another program given among their arguments.
WRAPPERS = frozenset(
    {
        "sudo", "doas", "su", "runuser", "env", "command", "builtin", "exec", "nohup", "nice",
        "ionice", "chrt", "taskset", "time", "timeout", "stdbuf", "setsid", "xargs",
        "parallel", "find", "watch", "strace", "ltrace", "flock", "busybox", "chroot",
        "unbuffer", "script", "eval", "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish",
        "ssh",
    }
)  # fmt: skip
#: Programs whose arguments may come from elsewhere (standard input, a file list).
_FILLERS = frozenset({"xargs", "parallel", "find"})
#: Shell words that may come before a command's program.
_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "do", "while", "until", "time"})

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_PUNCTUATION = set("();<>|&")
_NESTED = re.compile(r"[\s;&|()<>`]|\$\(")
_GLOB = re.compile(r"[*?\[]")
_BRACES = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_GLOB_ONLY = re.compile(r"^[*?.]*\*[*?.]*$")
_MAX_DEPTH = 8
#: Longer command lines are not read (reading is linear, times the nesting): a maybe.
_MAX_TEXT = 64_000


@dataclass(frozen=True)
class Command:
    """What a rule's `runs:` names: a program with the flags and arguments it must have."""

    program: str
    short: frozenset[str]
    long: frozenset[str]
    args: tuple[str, ...]


def parse_command(text: str) -> Command:
    """The command a rule names (`rm -r /`); `ValueError` saying why it cannot name one."""
    try:
        lines = list(_simple_commands(text))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a command a shell can read: {exc}") from None
    if len(lines) != 1 or not lines[0]:
        raise ValueError(f"{text!r} is not one command (no ;, &&, |, redirections or new lines)")
    words = lines[0]
    if any(_wild(w) or _GLOB.search(w) for w in words) or _ASSIGNMENT.match(words[0]):
        raise ValueError(f"{text!r}: name the program, its flags and arguments as plain words")
    short, long, args = _options(words[1:])
    return Command(posixpath.basename(words[0]) or words[0], short, long, tuple(args))


def runs(command: Command, value: str | Sequence[str]) -> tuple[Truth, str | None]:
    """Whether `value` (a command line, or an argv list) runs `command`; with a maybe, why."""
    if sum(map(len, [value] if isinstance(value, str) else value)) > _MAX_TEXT:
        return Truth.MAYBE, f"it is longer than {_MAX_TEXT} characters, too long to read"
    try:
        if isinstance(value, str):
            found = _line(command, value, 0)
        else:
            found = max(
                (_in_command(command, list(value)), *(_word(command, w, 1) for w in value)),
                key=lambda f: f[0],
            )
    except ValueError as exc:
        return Truth.MAYBE, f"it cannot be read as a shell command line ({exc})"
    return found


# -- reading a line ------------------------------------------------------------------------


def _line(command: Command, text: str, depth: int) -> tuple[Truth, str | None]:
    if depth > _MAX_DEPTH:
        return Truth.MAYBE, "its commands nest too deeply to read"
    best: tuple[Truth, str | None] = (Truth.NO, None)
    for words in _simple_commands(text):
        best = max(best, _in_command(command, words), key=lambda f: f[0])
        for word in words:
            if best[0] is Truth.YES:
                return best
            best = max(best, _word(command, word, depth + 1), key=lambda f: f[0])
    return best


def _word(command: Command, word: str, depth: int) -> tuple[Truth, str | None]:
    """A word that holds a command line of its own (`bash -c '…'`, `"$(…)"`): a maybe, as
    whether a shell reads it depends on the program it is given to."""
    if not _NESTED.search(word):
        return Truth.NO, None
    truth, why = _line(command, word, depth)
    if truth is Truth.YES:
        return Truth.MAYBE, f"{_short(word)!r} holds the command, quoted"
    return truth, why


def _simple_commands(text: str) -> Iterator[list[str]]:
    """Each simple command's words; redirections and their targets left out."""
    text = text.replace("\\\r\n", "").replace("\\\n", "")  # a line continued
    text = re.sub(r"[\r\n`]", " ; ", text)  # lines, and backquotes, as separators
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # `a#b` is one word to a shell; a missed word is worse than one more
    words: list[str] = []
    redirect = False
    for token in lexer:
        if token and set(token) <= _PUNCTUATION:
            if "<" in token or ">" in token:
                redirect = True
                continue
            if words:
                yield words
            words, redirect = [], False
            continue
        if redirect:
            redirect = False  # the file a redirection names: not an argument
            continue
        words.append(token)
    if words:
        yield words


# -- one simple command ----------------------------------------------------------------------


def _in_command(command: Command, words: list[str]) -> tuple[Truth, str | None]:
    start = 0
    while start < len(words) and (words[start] in _KEYWORDS or _ASSIGNMENT.match(words[start])):
        start += 1
    if start == len(words):
        return Truth.NO, None
    first = words[start]
    candidates = [start]
    if fold(posixpath.basename(first)) in WRAPPERS or _wild(first):
        candidates += range(start + 1, len(words))
    best: tuple[Truth, str | None] = (Truth.NO, None)
    for at in candidates:
        filled = any(fold(posixpath.basename(w)) in _FILLERS for w in words[start:at])
        best = max(best, _at(command, words, at, filled), key=lambda f: f[0])
        if best[0] is Truth.YES:
            break
    return best


def _at(command: Command, words: list[str], at: int, filled: bool) -> tuple[Truth, str | None]:
    """`words[at]` as the program, the words after it as its flags and arguments."""
    program, rest = words[at], words[at + 1 :]
    if _wild(program):
        return Truth.MAYBE, f"{program!r} may be any command"
    name = posixpath.basename(program.rstrip("/")) or program
    if name == command.program:
        truth, why = Truth.YES, None
    elif fold(name) == fold(command.program):
        truth, why = Truth.MAYBE, f"{program!r} differs from {command.program!r} only in form"
    elif _GLOB.search(name) and fnmatch.fnmatchcase(command.program, name):
        truth, why = Truth.MAYBE, f"{program!r} may name {command.program!r}"
    else:
        return Truth.NO, None
    wild = next((w for w in rest if _wild(w)), None)
    short, long, args = _options(rest)
    for found in (_flags(command, short, long), _arguments(command, args, filled)):
        if found[0] is Truth.NO and wild is not None:
            found = (Truth.MAYBE, f"{wild!r} may be any words")
        if found[0] < truth:
            truth, why = found
        if truth is Truth.NO:
            return truth, None
    return truth, why


def _options(words: Sequence[str]) -> tuple[frozenset[str], frozenset[str], list[str]]:
    """Short flag letters, long flag names, and the arguments (after `--`, all are)."""
    short: set[str] = set()
    long: set[str] = set()
    args: list[str] = []
    ended = False
    for word in words:
        if ended or word == "-" or not word.startswith("-"):
            args.append(word)
        elif word == "--":
            ended = True
        elif word.startswith("--"):
            long.add(word[2:].split("=", 1)[0])
        else:
            short.update(word[1:])
    return frozenset(short), frozenset(long), args


def _flags(
    command: Command, short: frozenset[str], long: frozenset[str]
) -> tuple[Truth, str | None]:
    letters = {fold(c) for c in short} | {fold(n[:1]) for n in long if n}
    truth, why = Truth.YES, None
    for flag in command.short:
        if flag in short:
            continue
        if fold(flag) not in letters:
            return Truth.NO, None
        truth, why = Truth.MAYBE, f"a flag may be -{flag} in another spelling"
    for name in command.long:
        if name in long or any(len(n) > 1 and name.startswith(n) for n in long):
            continue
        if fold(name[:1]) not in letters and fold(name) not in {fold(n) for n in long}:
            return Truth.NO, None
        truth, why = Truth.MAYBE, f"a flag may be --{name} in another spelling"
    return truth, why


def _arguments(command: Command, args: list[str], filled: bool) -> tuple[Truth, str | None]:
    truth, why = Truth.YES, None
    for wanted in command.args:
        found = max(
            ((_argument(wanted, a), repr(a)) for a in args),
            key=lambda f: f[0],
            default=(Truth.NO, ""),
        )
        if found[0] is Truth.NO and filled:
            found = (Truth.MAYBE, "an argument xargs or find fills in")
        if found[0] is Truth.NO:
            return Truth.NO, None
        if found[0] is Truth.MAYBE and truth is Truth.YES:
            truth, why = Truth.MAYBE, f"{found[1]} may be {wanted!r}"
    return truth, why


def _argument(wanted: str, given: str) -> Truth:
    if given == wanted:
        return Truth.YES
    if _wild(given) or given == "{}":
        return Truth.MAYBE
    if wanted.startswith(("/", "~", ".")):
        return _path(wanted, given)
    return Truth.MAYBE if fold(given) == fold(wanted) else Truth.NO


def _path(wanted: str, given: str) -> Truth:
    """Whether the path `given` names `wanted` (a path the rule gives), or may."""
    target, path = _normal(wanted), _normal(given)
    maybe = False
    head, last = posixpath.split(path)
    if _GLOB_ONLY.match(last):  # `/*`, `dir/.*`: everything in it, as good as the folder
        path, maybe = head or ("/" if path.startswith("/") else "."), True
    if path == target:
        return Truth.MAYBE if maybe else Truth.YES
    if fold(path) == fold(target):
        return Truth.MAYBE
    if _GLOB.search(path) and fnmatch.fnmatchcase(target, path):
        return Truth.MAYBE
    if path.startswith("~") != target.startswith("~"):
        # Where `~` is, is not known here: only a path that climbs out of it may be anything.
        return Truth.MAYBE if path.startswith("~") and ".." in path.split("/") else Truth.NO
    if path.startswith("/") or not target.startswith("/"):
        return Truth.NO
    # A relative path names a place that depends on where the command runs: it may be the
    # target when the target ends with its named parts (`.` and `..` alone may be anything).
    named = [p for p in path.split("/") if p not in ("", ".", "..")]
    parts = [p for p in target.split("/") if p]
    if len(named) > len(parts):
        return Truth.NO
    tail = parts[len(parts) - len(named) :]
    fits = all(fnmatch.fnmatchcase(t, n) for t, n in zip(tail, named, strict=True))
    return Truth.MAYBE if fits else Truth.NO


def _normal(path: str) -> str:
    squeezed = re.sub(r"/+", "/", path)
    normal = posixpath.normpath(squeezed) if squeezed else squeezed
    return "/" if normal.startswith("/") and normal.strip("/.") == "" else normal


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wild(word: str) -> bool:
    """A word the shell expands into what cannot be known here."""
    return "$" in word or "`" in word or _BRACES.search(word) is not None


def fold(text: str) -> str:
    """Text as a `deny` or `ask` rule compares it: case folded, in Unicode's compatibility
    form (full-width letters, ligatures), without format characters (zero-width spaces and
    such) or surrounding space."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return "".join(c for c in folded if unicodedata.category(c) != "Cf").strip()
