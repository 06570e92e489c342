from celery import shared_task
from django.conf import settings

from worklist.services import open_no_reply_tasks


@shared_task
def reply_follow_ups() -> str:
    """Daily: a follow-up task for each sent letter nobody answered (schedule it under Periodic tasks)."""
    days = settings.UNSAY_REPLY_FOLLOW_UP_DAYS
    return f"follow-up tasks opened: {open_no_reply_tasks(days=days)} (no reply after {days} days)"
