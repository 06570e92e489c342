"""Typed reading of UNSAY_* environment variables, parsed and validated by environs (marshmallow).

Every reader names the variable and its value in the error, so a bad deployment fails at start-up
with a message an operator can act on instead of a stack trace deep in a request. An empty value
means unset (a compose or systemd file that writes `NAME=` gets the default), which environs alone
would reject as "Not a valid integer".
"""

import hashlib
import hmac
import os
import re

from django.core.exceptions import ImproperlyConfigured
from environs import Env, EnvValidationError
from environs import validate as check

# eager: the first bad value raises at once. No .env file is read (read_env is never called) and no
# $VAR expansion happens (expand_vars off), so a secret containing "$" is taken as written.
_env = Env(eager=True, expand_vars=False)


def _unset(name):
    raw = os.environ.get(name)
    return raw is None or raw.strip() == ""


def _read(parse, name, **kwargs):
    try:
        return parse(name, **kwargs)
    except EnvValidationError as error:
        messages = error.error_messages
        reason = " ".join(messages) if isinstance(messages, list) else str(messages)
        raise ImproperlyConfigured(f"{name}={os.environ.get(name)!r} is invalid: {reason}") from None


def _bounds(minimum, maximum):
    if minimum is None and maximum is None:
        return None
    return check.Range(min=minimum, max=maximum)


def env_str(name, default=None):
    return default if _unset(name) else os.environ[name]


def env_bool(name, default=False):
    """1/0, true/false, yes/no, on/off, y/n, t/f in lower, Title or UPPER case."""
    return default if _unset(name) else _read(_env.bool, name)


def env_int(name, default, *, minimum=None, maximum=None):
    return default if _unset(name) else _read(_env.int, name, validate=_bounds(minimum, maximum))


def env_float(name, default, *, minimum=None):
    return default if _unset(name) else _read(_env.float, name, validate=_bounds(minimum, None))


def env_choice(name, default, choices):
    if _unset(name):
        value = default
        if value not in choices:
            raise ImproperlyConfigured(f"{name} default {value!r} is not one of: {', '.join(sorted(choices))}.")
        return value
    return _read(_env.str, name, validate=check.OneOf(sorted(choices)))


def env_list(name, default):
    """Comma-separated; items are trimmed and blank items dropped ("a, ,b," is ["a", "b"])."""
    if _unset(name):
        return list(default)
    return [item.strip() for item in _read(_env.list, name) if item.strip()]


_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
MIN_SECRET_LENGTH = 32


def _keyed_secret(name: str, item: str) -> tuple[str, bytes]:
    key_id, sep, secret = item.partition(":")
    if not sep or not _KEY_ID.fullmatch(key_id.strip()):
        raise ImproperlyConfigured(f"{name}: each key is written key-id:secret, the id 1-40 letters, digits, "
                                   f"'.', '_' or '-' (got an item starting {item[:12]!r}).")
    if len(secret) < MIN_SECRET_LENGTH:
        raise ImproperlyConfigured(f"{name}: the secret of key {key_id.strip()!r} is {len(secret)} characters; "
                                   f"use at least {MIN_SECRET_LENGTH} random ones.")
    return key_id.strip(), secret.encode()


def env_keyed_secret(name):
    """`key-id:secret` -> (key id, secret bytes), or None when unset."""
    return None if _unset(name) else _keyed_secret(name, os.environ[name].strip())


def env_keyed_secrets(name):
    """`id:secret,id:secret` -> [(key id, secret bytes), ...]; a key id given twice is refused."""
    keys = [_keyed_secret(name, item.strip()) for item in env_list(name, [])]
    ids = [key_id for key_id, _ in keys]
    if len(set(ids)) != len(ids):
        raise ImproperlyConfigured(f"{name} names a key id twice: {', '.join(sorted(ids))}.")
    return keys


def derived_key(purpose: str, secret: str) -> tuple[str, bytes]:
    """A key for `purpose` derived from another secret (for profiles that need no configuration), with an
    id that changes when the secret does, so links signed under another secret name a key not held."""
    key = hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).hexdigest().encode()  # as a configured one
    return f"derived-{hashlib.sha256(key).hexdigest()[:8]}", key
