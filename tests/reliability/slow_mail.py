"""A file email backend that takes a while per message, so a test can SIGKILL a dispatcher mid-send.
Each message is written to its own file named by its Message-ID, appended to, so a duplicate send
shows up as two lines rather than an overwrite."""

import os
import time
from pathlib import Path

from django.conf import settings
from django.core.mail.backends.base import BaseEmailBackend


class SlowFileBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        folder = Path(settings.EMAIL_FILE_PATH)
        folder.mkdir(parents=True, exist_ok=True)
        for message in email_messages:
            time.sleep(float(os.environ.get("SLOW_MAIL_SECONDS", "0.05")))
            key = message.extra_headers["Message-ID"].strip("<>").split("@")[0]
            with open(folder / f"{key}.sent", "a") as handle:
                handle.write(f"{os.getpid()} {','.join(message.to)}\n")
                handle.flush()
                os.fsync(handle.fileno())
        return len(email_messages)
