"""`runs:` reads a command line as a shell would: each way of writing a command is the
command, a command that is only mentioned is not, and what cannot be read is a maybe."""

from __future__ import annotations

import shlex

import pytest

from pizzabot.agent.shell import Truth, parse_command, runs

RM_ROOT = parse_command("rm -r /")


@pytest.mark.parametrize(
    "line",
    [
        "rm -r /",
        "rm -rf /",
        "rm -fr /",
        "rm -r -f /",
        "rm  -rf   /",
        "rm\t-rf /",
        "rm -rf --no-preserve-root /",
        "rm -rf -- /",
        "rm -rf //",
        "rm -rf /.",
        "rm -rf /tmp/..",
        "rm -rf / /tmp",
        "rm -rf '/'",
        'rm -rf "/"',
        "r\\m -rf /",
        "'rm' -rf /",
        "/bin/rm -rf /",
        "/usr/bin/rm -rf /",
        "sudo rm -rf /",
        "sudo -u root -E rm -rf /",
        "doas rm -rf /",
        "env -i PATH=/bin rm -rf /",
        "FOO=1 BAR=2 rm -rf /",
        "command rm -rf /",
        "exec rm -rf /",
        "nohup rm -rf / &",
        "nice -n 5 rm -rf /",
        "timeout 5 rm -rf /",
        "time rm -rf /",
        "ls; rm -rf /",
        "ls && rm -rf /",
        "false || rm -rf /",
        "ls | rm -rf /",
        "ls\nrm -rf /",
        "(rm -rf /)",
        "{ rm -rf /; }",
        "if true; then rm -rf /; fi",
        "echo $(rm -rf /)",
        "echo `rm -rf /`",
        "rm -rf > /dev/null /",
        "rm -rf / 2>&1",
        "rm -rf /\\\n",
        "ls a#; rm -rf /",
    ],
)
def test_each_way_of_writing_it_runs_it(line: str) -> None:
    assert runs(RM_ROOT, line)[0] is Truth.YES


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("rm -R /", "a flag may be -r in another spelling"),
        ("rm --recursive /", "a flag may be -r in another spelling"),
        ("rm --rec /", "a flag may be -r in another spelling"),
        ("RM -rf /", "'RM' differs from 'rm' only in form"),
        ("ｒｍ -rf /", "differs from 'rm' only in form"),
        ("rm -rf /*", "'/*' may be '/'"),
        ("rm -rf /.*", "'/.*' may be '/'"),
        ("rm -rf {/,tmp}", "'{/,tmp}' may be '/'"),
        ("rm -rf $TARGET", "'$TARGET' may be '/'"),
        ("rm $FLAGS /", "'$FLAGS' may be any words"),
        ("$RM -rf /", "'$RM' may be any command"),
        ("/???/r? -rf /", "may name 'rm'"),
        ("rm -rf .", "'.' may be '/'"),
        ("cd / && rm -rf *", "'*' may be '/'"),
        ("rm -rf ../../..", "may be '/'"),
        ("rm -rf ~/..", "may be '/'"),
        ("echo / | xargs rm -rf", "an argument xargs or find fills in may be '/'"),
        ("find / -exec rm -rf {} +", "may be '/'"),
        ("bash -c 'rm -rf /'", "holds the command, quoted"),
        ('echo "$(rm -rf /)"', "holds the command, quoted"),
        ("rm -rf 'never closed", "cannot be read as a shell command line"),
    ],
)
def test_what_may_run_it_is_a_maybe_that_says_why(line: str, why: str) -> None:
    truth, said = runs(RM_ROOT, line)
    assert truth is Truth.MAYBE
    assert said is not None and why in said


@pytest.mark.parametrize(
    "line",
    [
        "ls -la /",
        "rm /",  # not recursive: rm refuses a folder
        "rm -f /",
        "rm -rf /tmp/build",
        "rm -rf build",
        "rm -rf ./dist/*",
        "rm -rf ~",
        "echo rm -rf /",
        "grep -r rm /",
        "echo $HOME",
        "cat $A $B",
        "",
    ],
)
def test_what_does_not_run_it_does_not(line: str) -> None:
    assert runs(RM_ROOT, line) == (Truth.NO, None)


def test_an_argv_list_is_read_as_words() -> None:
    assert runs(RM_ROOT, ["rm", "-rf", "/"])[0] is Truth.YES
    assert runs(RM_ROOT, ["sudo", "/bin/rm", "-r", "-f", "/"])[0] is Truth.YES
    assert runs(RM_ROOT, ["bash", "-c", "rm -rf /"])[0] is Truth.MAYBE
    assert runs(RM_ROOT, ["ls", "-la", "/"])[0] is Truth.NO


def test_long_flags_and_arguments_in_the_rule() -> None:
    force_push = parse_command("git push --force")
    assert runs(force_push, "git push --force origin main")[0] is Truth.YES
    assert runs(force_push, "git push --force-with-lease")[0] is Truth.MAYBE
    assert runs(force_push, "git push -f")[0] is Truth.MAYBE
    assert runs(force_push, "git push origin main")[0] is Truth.NO
    assert runs(force_push, "git pull --force")[0] is Truth.NO

    passwd = parse_command("cat /etc/passwd")
    assert runs(passwd, "cat /etc//passwd")[0] is Truth.YES
    assert runs(passwd, "cd /etc && cat passwd")[0] is Truth.MAYBE
    assert runs(passwd, "cat /etc/hosts")[0] is Truth.NO


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("rm -r /; ls", "is not one command"),
        ("", "is not one command"),
        ("$X -r /", "plain words"),
        ("rm -r /*", "plain words"),
        ("A=1 rm", "plain words"),
        ("rm 'x", "not a command a shell can read"),
    ],
)
def test_a_rule_names_one_plain_command(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        parse_command(text)


def test_nesting_past_what_is_read_is_a_maybe_not_a_crash() -> None:
    line = "rm -rf /"
    for _ in range(9):  # each level quotes the quotes of the last: 39,426 characters
        line = "bash -c " + shlex.quote(line)
    assert runs(RM_ROOT, line) == (Truth.MAYBE, "its commands nest too deeply to read")
    assert runs(RM_ROOT, "ls " * 30_000)[0] is Truth.MAYBE

    substituted = "echo " + "$(" * 50 + "rm -rf /" + ")" * 50  # not quoted: read at once
    assert runs(RM_ROOT, substituted)[0] is Truth.YES
