"""Every shell line the docs print works as written: README.md and docs/*.md, the lines of their code blocks
marked sh, shell, bash or console (in a block with `$ ` prompts, only the prompted lines; `\\` continues a
line). A new line is covered without editing this file.

Each line is either run or checked:
- run, on a scratch database prepared as the README's examples assume (`manage.py demo --setup-only`):
  the `manage.py` lines of docs/*.md that work offline (OFFLINE_COMMANDS), in the docs' order, each
  expected to exit 0 with no traceback (README.md's own are run by tests/house/test_readme_commands.py);
- checked, when it cannot run here (it serves until stopped, needs the network, Docker, a server of its
  own, a production secret, or writes the source tree): the command exists and takes its options as
  written (manage.py commands through their own parser), make targets are in the Makefile, files and
  modules named exist, URLs are routes of the app, compose services are in compose.yaml.
A line that fits none of these fails the test, as does one whose reason to be only checked is unknown."""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.core.management import get_commands, load_command_class
from django.urls import Resolver404, resolve

from tests.procs import PROJECT_DIR, command_line_env, scratch_database_name

DOCS = [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").glob("*.md"))]
SHELL_FENCES = {"sh", "shell", "bash", "console"}
MANAGE = ".venv/bin/python manage.py "
# manage.py commands that run offline on the scratch database; any other is checked, not run.
OFFLINE_COMMANDS = {"ask", "sweep", "escalate", "dispatch_outbox", "status", "verify_audit", "seal_audit", "dbshell",
                    "ingest_recalls"}
# Why a command line is only checked, by what it is or what its block sets up.
NOT_RUN = {
    "network": "needs the network (api.fda.gov); the client is tested against a local fake",
    "server": "needs your own PostgreSQL or CockroachDB server (its block exports DATABASE_URL)",
    "production": "the production block (SECRET_KEY=... is a placeholder); .ci/run runs check --deploy",
    "writes": "writes the source tree (translation catalogues)",
    "placeholder": "names a patient and a person by placeholder (<...>)",
    "long": "ingests a whole bulk file (2 minutes here, and each sweep after it re-decides against every recall "
            "in it: 12 minutes in all); tests/recalls ingests records of the same files",
}
LONG_INGEST_BYTES = 1_000_000
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")


@dataclass
class DocLine:
    where: str
    text: str
    block_env: tuple[str, ...]  # variables the block exports before this line


def doc_lines() -> list[DocLine]:
    found = []
    for path in DOCS:
        lines, block, fence = path.read_text().splitlines(), [], None
        for number, raw in enumerate(lines, 1):
            stripped = raw.strip()
            if stripped.startswith("```"):
                if fence is not None:
                    if fence in SHELL_FENCES:
                        found.extend(_block_lines(path, block))
                    block, fence = [], None
                else:
                    fence = stripped[3:].strip()
                continue
            if fence is not None:
                block.append((number, stripped))
    return found


def _block_lines(path: Path, block: list[tuple[int, str]]) -> list[DocLine]:
    prompted = any(text.startswith("$ ") for _, text in block)
    joined, pending, start = [], "", None
    for number, text in block:
        if prompted and not pending:
            if not text.startswith("$ "):
                continue  # output shown in a transcript
            text = text[2:]
        if not pending and (not text or text.startswith("#")):
            continue
        start = start or number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        if not _quotes_closed(pending + text):  # a quoted argument (a JSON body) runs over lines
            pending += text + " "
            continue
        joined.append((start, pending + text))
        pending, start = "", None
    out, exported = [], []
    for number, text in joined:
        text = re.sub(r"\s+#\s.*$", "", text).strip()
        for command in text.split(" && "):  # a chain is its commands, one after the other
            out.append(DocLine(f"{path.relative_to(PROJECT_DIR)}:{number}", command.strip(), tuple(exported)))
        if text.startswith("export "):
            exported += [word.split("=")[0] for word in text.split()[1:] if "=" in word]
    return out


def _quotes_closed(text: str) -> bool:
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True


def _cat(match: re.Match) -> str:
    path = PROJECT_DIR / match.group(1)
    return path.read_text().strip() if path.is_file() else f"NO-FILE:{match.group(1)}"


def _words(text: str) -> list[str]:
    """The line's words as the shell gives them: `$(cat FILE)` read, `<placeholder>` one word."""
    text = re.sub(r"\$\(cat ([^)\s]+)\)", _cat, text)
    return shlex.split(re.sub(r"<[^>]*>|…", "PLACEHOLDER", text))


def _manage_args(text: str) -> list[str]:
    return _words(text[len(MANAGE):])


def why_not_run(line: DocLine) -> str | None:
    """None when the line runs on the scratch database; else why it is only checked."""
    text = line.text
    if not text.startswith(MANAGE) or line.where.startswith("README.md"):
        return "not a manage.py line of docs/*.md" if text.startswith(MANAGE) else "not a manage.py line"
    args = _manage_args(text)
    if "DATABASE_URL" in line.block_env:
        return NOT_RUN["server"]
    if "SECRET_KEY" in line.block_env:
        return NOT_RUN["production"]
    if args[0] == "makemessages":
        return NOT_RUN["writes"]
    if args[0] == "ingest_recalls" and "--since" in args:
        return NOT_RUN["network"]
    if args[0] == "ingest_recalls" and "--file" in args:
        source = PROJECT_DIR / args[args.index("--file") + 1]
        if source.is_file() and source.stat().st_size > LONG_INGEST_BYTES:
            return NOT_RUN["long"]
    if "PLACEHOLDER" in args:
        return NOT_RUN["placeholder"]
    if args[0] not in OFFLINE_COMMANDS:
        return f"{args[0]} is not among the commands run offline"
    return None


def check_line(line: DocLine) -> list[str]:
    """What is wrong with a line that is not run: the command, its options, files, routes it names."""
    words = _words(line.text)
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words or words[0] == "export":
        return []  # sets shell variables
    problems = []
    if line.text.startswith(MANAGE) or (words[:2] == [".venv/bin/python", "manage.py"]):
        args = words[2:]
        commands = get_commands()
        if args[0] not in commands:
            return [f"no manage.py command {args[0]!r}"]
        parser = load_command_class(commands[args[0]], args[0]).create_parser("manage.py", args[0])
        try:
            parser.parse_args(args[1:])
        except (SystemExit, Exception) as exc:
            problems.append(f"manage.py {args[0]} does not take {args[1:]}: {exc}")
        return problems
    if words[0] == "make":
        makefile = (PROJECT_DIR / "Makefile").read_text()
        return [f"no make target {t!r}" for t in words[1:] if not re.search(rf"^{re.escape(t)}:", makefile, re.M)]
    if words[0] == "docker" and words[1:2] == ["compose"]:
        compose = (PROJECT_DIR / "compose.yaml").read_text()
        services = set(re.findall(r"^  ([a-z0-9_-]+):\s*$", compose, re.M))
        named = [w for w in words[3:] if not w.startswith("-") and w in services | {"roach1"}]
        unknown = [w for w in words[3:4] if w not in services and not w.startswith("-")]
        return [f"no compose service {w!r}" for w in unknown if words[2] in {"logs", "exec"}] if not named else []
    if words[0] == "curl":
        for word in words[1:]:
            if word.startswith(("$API", "localhost", "http")):
                url = word.replace("$API", "http://127.0.0.1:8000/api/v1")
                path = urlparse(url if "://" in url else f"http://{url}").path
                try:
                    routed = resolve(path).url_name is not None  # the API's catch-all answers 404 problems
                except Resolver404:
                    routed = False
                if not routed:
                    problems.append(f"{path} is not a route of the app")
        return problems
    for word in words:
        if word.startswith(".venv/bin/") and not (PROJECT_DIR / word).exists() and word != ".venv/bin/python":
            problems.append(f"{word} is not installed")
        elif re.fullmatch(r"[a-z_]+(\.[a-z_]+)+:[a-z_]+", word):
            module = word.split(":")[0]
            if importlib.util.find_spec(module) is None:
                problems.append(f"no module {module}")
        elif "/" in word and not word.startswith(("$", "http")) and not word.startswith("-") \
                and not (PROJECT_DIR / word).exists() and not word.endswith(".mo"):
            problems.append(f"no file {word}")
    if words[:2] == [".venv/bin/python", "-m"] and importlib.util.find_spec(words[2]) is None:
        problems.append(f"no module {words[2]}")
    return problems


def test_every_doc_shell_line_is_run_or_checked():
    lines = doc_lines()
    assert len(lines) > 30 and any(line.where.startswith("docs/operator.md") for line in lines)
    problems = [f"{line.where}: {line.text!r}: {problem}"
                for line in lines if why_not_run(line) is not None for problem in check_line(line)]
    assert not problems, "\n".join(problems)


def inline_manage_lines() -> list[DocLine]:
    """`manage.py ...` written inline in the prose (an optional `[...]` part read as given)."""
    found = []
    for path in DOCS:
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            for span in re.findall(r"`(?:\.venv/bin/python )?manage\.py ([^`]+)`", raw):
                found.append(DocLine(f"{path.relative_to(PROJECT_DIR)}:{number}",
                                     MANAGE + span.replace("[", "").replace("]", ""), ()))
    return found


def inline_options() -> list[tuple[str, str, list[str]]]:
    """(where, command, options) for a command named with options in the prose (`sweep --dry-run`)."""
    commands, found = get_commands(), []
    for path in DOCS:
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            for span in re.findall(r"`([a-z_]+ --[^`]*)`", raw):
                words = span.split()
                if words[0] in commands:
                    options = [w.split("=")[0] for w in words[1:] if w.startswith("--")]
                    found.append((f"{path.relative_to(PROJECT_DIR)}:{number}", words[0], options))
    return found


def test_a_command_named_with_options_in_the_prose_takes_them():
    commands, problems = get_commands(), []
    mentions = inline_options()
    assert mentions
    for where, name, options in mentions:
        parser = load_command_class(commands[name], name).create_parser("manage.py", name)
        problems += [f"{where}: {name} has no option {option}" for option in options
                     if option not in parser._option_string_actions]
    assert not problems, "\n".join(problems)


def test_every_manage_py_command_named_in_the_prose_exists_with_its_options():
    lines = inline_manage_lines()
    assert len(lines) > 10
    # A command named alone is a reference to it (it exists); with options, a line a reader may type.
    named = [line for line in lines if len(_manage_args(line.text)) == 1]
    problems = [f"{line.where}: no command {line.text!r}" for line in named
                if _manage_args(line.text)[0] not in get_commands()]
    problems += [f"{line.where}: {line.text!r}: {problem}"
                 for line in lines if line not in named for problem in check_line(line)]
    assert not problems, "\n".join(problems)


def test_a_wrong_option_a_missing_target_file_or_route_is_found():
    def line(text, env=()):
        return DocLine("docs/x.md:1", text, env)

    assert check_line(line(".venv/bin/python manage.py ingest_recalls --demo"))
    assert check_line(line(".venv/bin/python manage.py runserver_plus"))
    assert check_line(line(".venv/bin/python manage.py no_such_command"))
    assert check_line(line("make no-such-target"))
    assert check_line(line(".venv/bin/python docs/examples/no_such_client.py stdio"))
    assert check_line(line("curl -s $API/no-such-route"))
    assert not check_line(line(".venv/bin/python manage.py sweep --dry-run"))
    assert not check_line(line("curl -s localhost:8000/health"))
    assert why_not_run(line(".venv/bin/python manage.py migrate", ("DATABASE_URL",))) == NOT_RUN["server"]
    assert why_not_run(line(".venv/bin/python manage.py sweep")) is None


@pytest.fixture
def scratch_database():
    with scratch_database_name("docs") as name:
        yield name


@pytest.mark.slow
@pytest.mark.django_db
def test_doc_command_lines_run_as_written_on_a_scratch_database(scratch_database, tmp_path):
    env = command_line_env(scratch_database, tmp_path, demo_password="docs-demo-password-123")
    python = str(PROJECT_DIR / ".venv" / "bin" / "python")
    runs = [line.text for line in doc_lines() if why_not_run(line) is None]
    assert any("dbshell" in text for text in runs) and any("sweep" in text for text in runs)
    for text in [MANAGE + "demo --setup-only", *runs]:
        argv = [python if os.path.exists(python) else sys.executable, "manage.py", *_manage_args(text)]
        started = time.monotonic()
        result = subprocess.run(argv, cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=900,
                                stdin=subprocess.DEVNULL)
        print(f"docs: {time.monotonic() - started:6.1f}s  {text}")
        assert result.returncode == 0, f"{text!r} failed:\n{result.stdout[-1500:]}\n{result.stderr[-3000:]}"
        assert "Traceback" not in result.stderr, f"{text!r}:\n{result.stderr[-3000:]}"
