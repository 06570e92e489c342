"""Every write of Correction.status, OutboxMessage.status and Decision.status goes through its one
helper: corrections.transitions.move / move_row (checked against the transition table, with the audit
event) and, for decisions, memory's own write path (memory.fact_writes.supersede_standing for a set;
memory.decisions.record_decision for the one decision it replaces). Every write of Unit.state goes through
shelf.transitions.move_units (checked against the shelf's table of unit moves; the second half of this file).

The source is walked (every .py file outside tests, migrations, the virtualenv and bench/, whose
scripts build benchmark worlds directly, and every .sql file) for what writes one of those columns:
`x.status = <their status>`, `status=` in an update()/create() on those models or with one of their
statuses, and `UPDATE <their table> SET ... status` in SQL. Any writer outside the helpers fails."""

import ast
import re

import pytest

from corrections.models import Correction, OutboxMessage
from memory.models import Decision
from shelf.models import Unit
from tests.paths import PROJECT_DIR as ROOT

SKIPPED_DIRS = {".venv", "tests", "migrations", "node_modules", "bench", ".git", "__pycache__"}
MODELS = {"Correction", "OutboxMessage", "Decision"}
TABLES = tuple(model._meta.db_table for model in (Correction, OutboxMessage, Decision))
# Statuses only these models have (a run's "failed" is not among them).
VOCABULARY = {"draft", "approved", "rejected", "stale", "sent", "held", "ready", "sending", "cancelled", "unknown",
              "standing", "superseded"}
STATUS_ALIASES = {"C", "M"}  # corrections.transitions' and erasure's names for Correction/OutboxMessage.Status
WRITING_CALLS = {"update", "create", "get_or_create", "update_or_create", "bulk_create"}
HELPERS = {
    "corrections/transitions.py": {"move"},
    "memory/fact_writes.py": {"supersede_standing"},
    "memory/decisions.py": {"record_decision"},
}
SQL_UPDATE = re.compile(r"UPDATE\s+(?P<table>\{[^}]*\}|\w+)(?:\s+(?:AS\s+)?\w+)?\s+SET\s+(?P<set>[^;]*?)"
                        r"(?:\bWHERE\b|\bRETURNING\b|$|;)", re.IGNORECASE | re.DOTALL)


def _root_name(node) -> str:
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return node.id if isinstance(node, ast.Name) else ""


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _their_status(value) -> bool:
    """A value that is one of these models' statuses: Correction.Status.X, M.SENT, "stale"..."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value in VOCABULARY
    names = _names(value)
    return "Status" in names and bool(names & MODELS) or bool(names & STATUS_ALIASES) and \
        isinstance(value, ast.Attribute)


def _sql_writers(text: str) -> list[int]:
    """Offsets of `UPDATE <their table> SET ... status` (a table named by a placeholder counts)."""
    found = []
    for m in SQL_UPDATE.finditer(text):
        table = m.group("table").lower()
        if (table.startswith("{") or table in TABLES) and re.search(r"\bstatus\s*=", m.group("set"), re.I):
            found.append(m.start())
    return found


def _unknown_rows(receiver: str, status, module_names: set) -> bool:
    """An update of rows whose model the call does not name (`rows.update(status=new)`), in a module
    that uses one of these models, with a status that is not visibly another model's."""
    if not receiver or receiver[:1].isupper() or not module_names & MODELS:
        return False
    names = _names(status)
    return not ("Status" in names and any(n[:1].isupper() and n not in MODELS | {"Status"} for n in names))


def writers_in(source: str, path: str = "<snippet>") -> list[tuple[str, int, str]]:
    """(path, line, enclosing function) of every status write in a Python source."""
    tree = ast.parse(source)
    module_names = _names(tree)
    found = []
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def where(node) -> str:
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node.name
        return "<module>"

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                named = (isinstance(target, ast.Attribute) and target.attr == "status") or (
                    isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                    and target.slice.value == "status")  # values["status"] = ...; update(**values)
                if named and node.value is not None and _their_status(node.value):
                    found.append((path, node.lineno, where(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            status = next((k.value for k in node.keywords if k.arg == "status"), None)
            if status is None:
                continue
            constructs = isinstance(node.func, ast.Name) and name in MODELS
            writes = isinstance(node.func, ast.Attribute) and name in WRITING_CALLS
            receiver = _root_name(node.func)
            if constructs or (writes and (receiver in MODELS or _their_status(status)
                                          or _unknown_rows(receiver, status, module_names))):
                found.append((path, node.lineno, where(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for offset in _sql_writers(node.value):
                found.append((path, node.lineno + node.value[:offset].count("\n"), where(node)))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{x}" for v in node.values)
            for offset in _sql_writers(text):
                found.append((path, node.lineno + text[:offset].count("\n"), where(node)))
    return sorted(found)


def walk(python_writers, sql_writers) -> list[tuple[str, int, str]]:
    """(path, line, function) of every write found in product code: `python_writers(text, path)` over each
    .py file, `sql_writers(text)` (offsets) over each .sql file."""
    found = []
    for path in sorted([*ROOT.rglob("*.py"), *ROOT.rglob("*.sql")]):
        relative = path.relative_to(ROOT)
        if SKIPPED_DIRS & set(relative.parts[:-1]):
            continue
        text = path.read_text()
        if path.suffix == ".py":
            found.extend(python_writers(text, str(relative)))
        else:
            found.extend((str(relative), text[:offset].count("\n") + 1, "<sql>") for offset in sql_writers(text))
    return found


def all_writers() -> list[tuple[str, int, str]]:
    return walk(writers_in, _sql_writers)


def outside(found, helpers):
    return [(path, line, func) for path, line, func in found if func not in helpers.get(path, set())]


def _outside_helpers(found):
    return outside(found, HELPERS)


SNIPPET = '''
from corrections.models import Correction, OutboxMessage
from memory.models import Decision

def approve_quietly(correction, message_id, ids):
    correction.status = Correction.Status.APPROVED
    correction.save()
    OutboxMessage.objects.filter(pk=message_id).update(status="ready")
    Decision.objects.filter(id__in=ids).update(status=Decision.Status.SUPERSEDED)
    rows = OutboxMessage.objects.all()
    rows.update(status=OutboxMessage.Status.CANCELLED)

def raw(cursor, ids):
    cursor.execute("UPDATE memory_decision SET superseded_at = now(), status = 'superseded' WHERE id = ANY(%s)",
                   [ids])
    table = "corrections_outboxmessage"
    cursor.execute(f"UPDATE {table} SET status = 'sending' WHERE id = ANY(%s)", [ids])

def end_pending(patient_id, old, new):
    values = {"last_error": ""}
    values["status"] = OutboxMessage.Status.FAILED
    Correction.objects.filter(patient_id=patient_id).filter(status=old).update(status=new)
    pending = Correction.objects.filter(patient_id=patient_id)
    pending.update(status=new)

def not_writers(run, rows, cursor):
    run.status = "finished"
    values = {"status": "running"}
    values["status"] = run.Status.FAILED
    rows.filter(status=Correction.Status.DRAFT).count()
    cursor.execute("SELECT status FROM corrections_correction WHERE status = 'draft'")
'''


def test_a_new_writer_anywhere_is_found():
    found = writers_in(SNIPPET, "corrections/somewhere.py")
    assert [line for _path, line, _func in found] == [6, 8, 9, 11, 14, 17, 21, 22, 24]
    assert {func for _path, _line, func in found} == {"approve_quietly", "raw", "end_pending"}
    assert _outside_helpers(found) == found
    # The same writer inside the helper is the helper.
    assert _outside_helpers([("corrections/transitions.py", 1, "move")]) == []
    assert _sql_writers("UPDATE corrections_correction c SET updated = now(), status = 'stale' WHERE c.id = 1")


# Unit.state: every move of a unit on the shelf goes through shelf.transitions.move_units, checked against its
# table (shelf.transitions.UNIT). `state` is a common word (a deadline's, a patient line's), so a write counts as
# the unit's when the value is one of its states or the module names Unit; inserting a unit writes its state too
# (the column has a default).
UNIT_STATE_HELPERS = {"shelf/transitions.py": {"move_units"}}
UNIT_STATES = {str(s) for s in Unit.State}
UNIT_STATE_NAMES = {s.name for s in Unit.State}
UNIT_TABLE = Unit._meta.db_table
UNIT_CREATING_CALLS = {"create", "get_or_create", "update_or_create", "bulk_create"}
UNIT_SQL = re.compile(
    rf"UPDATE\s+(?P<table>\{{[^}}]*\}}|{UNIT_TABLE})(?:\s+(?:AS\s+)?\w+)?\s+SET\s+(?P<set>[^;]*?)"
    r"(?:\bWHERE\b|\bRETURNING\b|$|;)"
    rf"|(?:COPY|INSERT\s+INTO)\s+{UNIT_TABLE}\s*\((?P<columns>[^)]*)\)", re.IGNORECASE | re.DOTALL)


def _unit_sql_writers(text: str) -> list[int]:
    found = []
    for m in UNIT_SQL.finditer(text):
        if m.group("columns") is not None:
            if re.search(r"\bstate\b", m.group("columns"), re.I):
                found.append(m.start())
        elif re.search(r"\bstate\s*=", m.group("set"), re.I):
            found.append(m.start())
    return found


def _a_unit_state(value) -> bool:
    """Unit.State.QUARANTINED, S.RETURNED, "dispensed"..."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, str) and value.value in UNIT_STATES
    return isinstance(value, ast.Attribute) and value.attr in UNIT_STATE_NAMES


def _names_state(node) -> bool:
    """A list or tuple of field names with "state" in it (bulk_update's fields, update_fields, COPY's columns)."""
    return isinstance(node, (ast.List, ast.Tuple, ast.Set)) and any(
        isinstance(e, ast.Constant) and e.value == "state" for e in node.elts)


def unit_state_writers_in(source: str, path: str = "<snippet>") -> list[tuple[str, int, str]]:
    """(path, line, enclosing function) of every write of Unit.state in a Python source."""
    tree = ast.parse(source)
    names_unit = "Unit" in _names(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def where(node) -> str:
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node.name
        return "<module>"

    def assigned(target, value) -> list:
        if isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(
                target.elts) else [value] * len(target.elts)
            return [pair for t, v in zip(target.elts, values, strict=True) for pair in assigned(t, v)]
        return [(target, value)]

    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target, value in (pair for t in targets for pair in assigned(t, node.value)):
                named = (isinstance(target, ast.Attribute) and target.attr == "state") or (
                    isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                    and target.slice.value == "state")
                # A constant that is not a unit's state is someone else's (a deadline's "due").
                theirs = _a_unit_state(value) or (names_unit and not isinstance(value, ast.Constant))
                if named and theirs:
                    found.append((path, node.lineno, where(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            receiver = _root_name(node.func)
            state = next((k.value for k in node.keywords if k.arg == "state"), None)
            constructs = isinstance(node.func, ast.Name) and name == "Unit"
            creates = isinstance(node.func, ast.Attribute) and receiver == "Unit" and name in UNIT_CREATING_CALLS
            writes = state is not None and isinstance(node.func, ast.Attribute) and name in WRITING_CALLS and (
                receiver == "Unit" or _a_unit_state(state) or (names_unit and receiver[:1].islower()))
            fields = names_unit and (name in {"bulk_update", "save"} or any(
                isinstance(a, ast.Name) and a.id == "Unit" for a in node.args)) and any(
                _names_state(a) for a in [*node.args, *(k.value for k in node.keywords)])
            if constructs or creates or writes or fields:
                found.append((path, node.lineno, where(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for offset in _unit_sql_writers(node.value):
                found.append((path, node.lineno + node.value[:offset].count("\n"), where(node)))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{x}" for v in node.values)
            for offset in _unit_sql_writers(text):
                found.append((path, node.lineno + text[:offset].count("\n"), where(node)))
    return sorted(set(found))


def all_unit_state_writers() -> list[tuple[str, int, str]]:
    return walk(unit_state_writers_in, _unit_sql_writers)


def _outside_unit_helpers(found):
    return outside(found, UNIT_STATE_HELPERS)


UNIT_SNIPPET = '''
from shelf.models import Unit

def quarantine_quietly(unit, ids, units, row, now):
    unit.state = Unit.State.QUARANTINED
    unit.state, unit.dispensing, unit.changed_at = Unit.State.DISPENSED, row, now
    Unit.objects.filter(id__in=ids).update(state="returned")
    rows = Unit.objects.all()
    rows.update(state=new_state)
    Unit.objects.bulk_update(units, ["state", "changed_at"])
    unit.save(update_fields=["state"])
    _copy(Unit, ["site", "gtin", "serial", "state"], units)
    Unit.objects.create(site="Main St", gtin="00313668409307", serial="X1")
    Unit(site="Main St", state="on_hand")

def raw(cursor, ids):
    cursor.execute("UPDATE shelf_unit SET state = 'returned' WHERE id = ANY(%s)", [ids])
    cursor.execute("COPY shelf_unit (site, gtin, serial, state) FROM STDIN")

def not_writers(deadline, line, units, cursor):
    deadline.state = "due"
    line.state = "reached"
    Unit.objects.filter(state=Unit.State.ON_HAND).count()
    Unit.objects.bulk_update(units, ["lot", "expiry"])
    cursor.execute("SELECT state FROM shelf_unit WHERE state = 'quarantined'")
'''


def test_a_new_unit_state_writer_anywhere_is_found():
    found = unit_state_writers_in(UNIT_SNIPPET, "shelf/somewhere.py")
    assert [line for _path, line, _func in found] == [5, 6, 7, 9, 10, 11, 12, 13, 14, 17, 18]
    assert {func for _path, _line, func in found} == {"quarantine_quietly", "raw"}
    assert _outside_unit_helpers(found) == found
    assert _outside_unit_helpers([("shelf/transitions.py", 1, "move_units")]) == []
    # A status write is not a unit's, nor a unit's a status write.
    assert unit_state_writers_in(SNIPPET) == []
    assert writers_in(UNIT_SNIPPET) == []


@pytest.mark.parametrize("walk_writers, helpers", [
    pytest.param(all_writers, HELPERS, id="status fields through their transition helpers"),
    pytest.param(all_unit_state_writers, UNIT_STATE_HELPERS, id="Unit.state through move_units"),
])
def test_every_status_write_goes_through_its_helper(walk_writers, helpers):
    found = walk_writers()
    assert outside(found, helpers) == []
    # The helpers themselves are found: the walk sees what it is looking for.
    assert {(path, func) for path, _line, func in found} == {
        (path, func) for path, funcs in helpers.items() for func in funcs}
