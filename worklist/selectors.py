"""The worklist's reads under one name, for callers that read several of them through `selectors.`;
each lives in the module of its job: match_classes, exposure, patient_state, recall_list,
recall_pages, recall_report, contact_history. Nothing is defined here."""

from .contact_history import patient_trail, sent_history
from .exposure import _exposed_patient_ids, exposure_classes
from .patient_state import LinePages, PatientLine, patient_lines, patient_states, state_counts
from .recall_list import Deadline, RecallFacts, deadline_for, deadline_status, recall_facts, worklist
from .recall_pages import (
    RecallFile,
    RecallPage,
    answers_and_tasks,
    follow_up_page,
    follow_up_queue,
    open_patient_tasks,
    recall_file,
    recall_known,
    recall_page,
    uncertain_scope,
)
from .recall_report import EFFECTIVENESS_COLUMNS, REPORT_COLUMNS, reply_effectiveness, report, report_page, report_row

__all__ = [
    "EFFECTIVENESS_COLUMNS", "REPORT_COLUMNS", "Deadline", "LinePages", "PatientLine", "RecallFacts", "RecallFile",
    "RecallPage", "_exposed_patient_ids", "answers_and_tasks", "deadline_for", "deadline_status", "exposure_classes",
    "follow_up_page", "follow_up_queue", "open_patient_tasks", "patient_lines", "patient_states", "patient_trail",
    "recall_facts", "recall_file", "recall_known", "recall_page", "report", "report_page", "report_row",
    "reply_effectiveness", "sent_history", "state_counts", "uncertain_scope", "worklist",
]
