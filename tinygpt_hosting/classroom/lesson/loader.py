"""Lesson files: a teacher's prepared steps, in TOML, read and checked before a class sees them.

    title = "How a GPT picks the next word"

    [[step]]
    page = "Softmax_and_sampling"
    prompt = "ROMEO:\\nBut soft, what light"
    model = ["SmolLM2-135M-Instruct.Q4_1.gguf", "shakespeare.npz"]  # the first one present
    temperature = 0.7
    question = "What comes next?"
    true_next = " through"
    notes = "For the teacher's screen only."

Every error names the step, its line in the file and what is wrong. tomllib gives a line only
for a syntax error; for the rest this module finds each `[[step]]` header, and each key under
it, by scanning the text itself. The file's size and its number of steps are checked before it
is parsed. Docs: docs/lessons.md. Pure Python: no Streamlit call.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tinygpt_app import settings
from tinygpt_app.kit.controls import CONTROLS
from tinygpt_app.kit.navigation import PAGE_FILES, url_path

LESSONS_DIR = settings.ROOT / "lessons"  # the shipped lessons (in the wheel: _app/lessons)
MAX_LESSON_BYTES = 64 * 1024  # a lesson of 40 steps with long notes is ~20 kB
MAX_STEPS = 40  # a class keeps at most 40 rounds (classroom.rules.Limits.max_rounds)
MAX_PROMPT_CHARS = 1000  # what a class shares (classroom.rules.Limits.max_prompt_chars)
MAX_QUESTION_CHARS = 200  # a round's details hold text of at most 200 chars (rules)
MAX_CHOICE_CHARS = 32  # a guess (rules.Limits.max_guess_chars)
MAX_CHOICES = 8
MAX_NOTES_CHARS = 2000
MAX_TITLE_CHARS = 120
MAX_MODELS = 4  # models a step may list, in order of preference
PAGES = tuple(url_path(f) for f in PAGE_FILES)  # "Softmax_and_sampling", ...
STEP_KEYS = ("page", "prompt", "model", "position", "question", "choices", "true_next",
             "notes", *CONTROLS)
TOP_KEYS = ("title", "summary", "step")
_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_STEP_HEADER = re.compile(r"""\s*\[\[\s*(step|"step"|'step')\s*\]\]\s*(#.*)?""")
_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")
_KEY = re.compile(r"""\s*([A-Za-z0-9_-]+|"[^"]*"|'[^']*')\s*=""")


class LessonError(ValueError):
    """What is wrong with a lesson file, with the step (1-based) and line when known."""

    def __init__(self, message: str, *, step: int | None = None, line: int | None = None):
        where = ", ".join(part for part in (f"step {step}" if step else "",
                                            f"line {line}" if line else "") if part)
        super().__init__(f"{where.capitalize()}: {message}" if where
                         else message[:1].upper() + message[1:])
        self.step, self.line, self.reason = step, line, message


@dataclass(frozen=True)
class Step:
    """One step of a lesson: what the class sees, and optionally a question for it."""

    number: int  # 1-based
    line: int  # of its [[step]] header
    page: str
    prompt: str
    models: tuple[str, ...] = ()  # in order of preference; () keeps the class's model
    position: int | None = None  # None: the prompt's last token
    controls: dict[str, object] = field(default_factory=dict)
    question: str | None = None
    choices: tuple[str, ...] = ()  # () asks for a free guess of the next token
    true_next: str | None = None  # the text's real continuation (its first token counts)
    notes: str = ""  # for the teacher's own screen, never projected


@dataclass(frozen=True)
class Lesson:
    title: str
    summary: str
    steps: tuple[Step, ...]


# ----------------------------------------------------------------------------- where things are


def _multiline_opener(line: str, inside: str | None) -> str | None:
    """The triple quote a line leaves open (None: none), given the one it starts inside."""
    i = 0
    while i < len(line):
        if inside:
            end = line.find(inside, i)
            if end < 0:
                return inside
            i, inside = end + 3, None
            continue
        if line[i] == "#":
            return None
        for quote in ('"""', "'''"):
            if line.startswith(quote, i):
                inside, i = quote, i + 3
                break
        else:
            if line[i] in "\"'":  # a one-line string: skip to its end
                end = line.find(line[i], i + 1)
                i = len(line) if end < 0 else end + 1
            else:
                i += 1
    return inside


def step_lines(text: str) -> list[tuple[int, dict[str, int]]]:
    """For each `[[step]]` header, outside multi-line strings: (its line, {key: line}) where
    the keys are those set under it (lines are 1-based)."""
    found: list[tuple[int, dict[str, int]]] = []
    inside, in_step = None, False
    for number, line in enumerate(text.splitlines(), start=1):
        if inside is None:
            if _STEP_HEADER.fullmatch(line):
                found.append((number, {}))
                in_step = True
            elif line.lstrip().startswith("["):  # another table: its keys are not the step's
                in_step = False
            elif in_step and (key := _KEY.match(line)):
                found[-1][1].setdefault(key.group(1).strip("\"'"), number)
        inside = _multiline_opener(line, inside)
    return found


# ----------------------------------------------------------------------------- reading


def read_lesson(data: bytes) -> Lesson:
    """A lesson from a file's bytes, checked; LessonError says what is wrong and where."""
    if len(data) > MAX_LESSON_BYTES:
        raise LessonError(f"The file has {len(data):,} bytes; a lesson is at most "
                          f"{MAX_LESSON_BYTES:,}.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise LessonError(f"The file is not UTF-8 text (byte {err.start:,}).") from None
    where = step_lines(text)
    if len(where) > MAX_STEPS:
        raise LessonError(f"The file has {len(where)} steps; a lesson has at most {MAX_STEPS}.",
                          line=where[MAX_STEPS][0])
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise _syntax_error(err, where) from None
    return _lesson(parsed, where)


def _syntax_error(err: tomllib.TOMLDecodeError, where: list) -> LessonError:
    """tomllib's message, with its line (and so the step the line is in) said first."""
    found = _AT_LINE.search(str(err))
    line = int(found.group(1)) if found else None
    message = _AT_LINE.sub("", str(err)).strip()
    step = sum(1 for header, _ in where if line and header <= line) or None
    return LessonError(f"this is not valid TOML: {message}.", step=step, line=line)


def load_lesson(path: Path) -> Lesson:
    """A lesson file from the disk, its size checked before it is read."""
    size = path.stat().st_size
    if size > MAX_LESSON_BYTES:
        raise LessonError(f"The file has {size:,} bytes; a lesson is at most "
                          f"{MAX_LESSON_BYTES:,}.")
    with path.open("rb") as f:
        return read_lesson(f.read(MAX_LESSON_BYTES + 1))


def shipped_lessons() -> dict[str, Path]:
    """The lesson files of the lessons folder, by file name (a few; read when chosen)."""
    if not LESSONS_DIR.is_dir():
        return {}
    return {p.name: p for p in sorted(LESSONS_DIR.glob("*.toml"))[:50] if p.is_file()}


def _lesson(parsed: dict, where: list[tuple[int, dict[str, int]]]) -> Lesson:
    unknown = [key for key in parsed if key not in TOP_KEYS]
    if unknown:
        raise LessonError(f"Unknown key {unknown[0]!r} at the top; a lesson has "
                          f"{', '.join(TOP_KEYS)} (a step's keys go under [[step]]).")
    title = _text(parsed.get("title", ""), MAX_TITLE_CHARS, "title", None, None)
    summary = _text(parsed.get("summary", ""), MAX_NOTES_CHARS, "summary", None, None)
    steps = parsed.get("step")
    if not isinstance(steps, list) or not steps:
        raise LessonError("A lesson has at least one step: a [[step]] table.")
    if len(steps) != len(where):  # e.g. step = [...] written inline: no header to point at
        raise LessonError("Write each step as its own [[step]] table.")
    return Lesson(title, summary, tuple(
        _step(i, table, *where[i - 1]) for i, table in enumerate(steps, start=1)))


def _step(number: int, table: dict, line: int, keys: dict[str, int]) -> Step:
    def fail(message: str, key: str | None = None) -> LessonError:
        return LessonError(message, step=number, line=keys.get(key, line) if key else line)

    for key in table:
        if key not in STEP_KEYS:
            raise fail(f"unknown key {key!r}; a step has: {', '.join(STEP_KEYS)}.", key)
    for key in ("page", "prompt"):
        if key not in table:
            raise fail(f"every step names its {key}.")
    page = table["page"]
    if page not in PAGES:
        raise fail(f"page {page!r} is not one of the app's pages: {', '.join(PAGES)}.", "page")
    prompt = _text(table["prompt"], MAX_PROMPT_CHARS, "prompt", fail, "prompt")
    if not prompt:
        raise fail("the prompt is empty.", "prompt")
    question = table.get("question")
    if question is not None:
        question = _text(question, MAX_QUESTION_CHARS, "question", fail, "question")
    choices = _choices(table.get("choices"), fail)
    true_next = table.get("true_next")
    if true_next is not None:
        true_next = _text(true_next, MAX_CHOICE_CHARS, "true_next", fail, "true_next")
    _question_parts(question, choices, true_next, fail)
    return Step(number, line, page, prompt, _models(table.get("model"), fail),
                _position(table.get("position"), fail), _controls(table, fail), question,
                choices, true_next,
                _text(table.get("notes", ""), MAX_NOTES_CHARS, "notes", fail, "notes"))


def _question_parts(question, choices, true_next, fail) -> None:
    if (choices or true_next is not None) and question is None:
        raise fail("choices and true_next belong to a question: add question = \"...\".",
                   "choices" if choices else "true_next")
    if choices and true_next is not None and true_next not in choices:
        raise fail(f"true_next {true_next!r} is not among the choices (the true token is "
                   "always one of them).", "true_next")
    if true_next == "":
        raise fail("true_next is empty.", "true_next")


def _text(value: object, cap: int, what: str, fail, key: str | None) -> str:
    def bad(message: str) -> LessonError:
        return fail(message, key) if fail else LessonError(message)

    if not isinstance(value, str):
        raise bad(f"{what} must be text (in quotes).")
    if len(value) > cap:
        raise bad(f"{what} has {len(value):,} characters; at most {cap:,}.")
    if "\x00" in value:
        raise bad(f"{what} contains a NUL character.")
    return value


def _models(value: object, fail) -> tuple[str, ...]:
    if value is None:
        return ()
    models = [value] if isinstance(value, str) else value
    if not isinstance(models, list) or not 1 <= len(models) <= MAX_MODELS:
        raise fail(f"model is a model's file name, or a list of 1 to {MAX_MODELS} of them "
                   "(the first one present is used).", "model")
    for model in models:
        if not isinstance(model, str) or not _MODEL_ID.fullmatch(model):
            raise fail("a model is named by its file name in the models folder, such as "
                       "\"shakespeare.npz\" (letters, digits, '_', '.', '-').", "model")
    return tuple(models)


def _position(value: object, fail) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**6:
        raise fail("position is a whole number of tokens from 0 (leave it out: the last "
                   "token).", "position")
    return value


def _choices(value: object, fail) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not 2 <= len(value) <= MAX_CHOICES:
        raise fail(f"choices is a list of 2 to {MAX_CHOICES} texts.", "choices")
    choices = tuple(_text(c, MAX_CHOICE_CHARS, "a choice", fail, "choices") for c in value)
    if any(not c for c in choices):
        raise fail("a choice is empty.", "choices")
    if len(set(choices)) != len(choices):
        raise fail("the choices repeat one another.", "choices")
    return choices


def _controls(table: dict, fail) -> dict[str, object]:
    controls = {}
    for name, spec in CONTROLS.items():
        if name not in table:
            continue
        value = table[name]
        if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not _of_kind(value, spec.kind):
            raise fail(f"{name} is {spec.describe()}.", name)
        try:
            controls[name] = spec.parse()(value)
        except ValueError:
            raise fail(f"{name} is {spec.describe()}.", name) from None
    return controls


def _of_kind(value: object, kind: type) -> bool:
    """Whether a TOML value has the control's kind: true or false for a switch, a text for a
    word, a number for a number (a whole one or not: the control's parser says)."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    return isinstance(value, str) if kind is str else isinstance(value, (int, float))
