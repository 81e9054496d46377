"""Sundial's Python SDK: a client of the REST API and a worker that runs
jobs over the HTTP worker protocol. Standard library only; encryption
(:class:`Keyring`) needs the ``cryptography`` package (``sundial-sdk[crypto]``).

    from sundial import Client, Worker

    client = Client("http://127.0.0.1:8080", api_key="...")
    job = client.submit("email.send", {"to": "ada@example.com"}, queue="emails")
    print(client.wait(job["id"], timeout=30)["state"])
"""

from .client import FINAL_STATES, JSON, Client, job_options
from .encryption import EncryptionError, Keyring, MissingKey, is_encrypted
from .errors import (
    ApiError,
    Conflict,
    InternalError,
    InvalidArgument,
    Cancel,
    LeaseLost,
    NondeterminismError,
    NoRetry,
    Parked,
    RetryAfter,
    Snooze,
    SignalTimeout,
    StepError,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    SundialError,
    TransportError,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
    WaitTimeout,
)
from .joblog import JobLog
from .worker import Handler, JobContext, Worker

__version__ = "0.2.0"

__all__ = [
    "ApiError",
    "Cancel",
    "Client",
    "Conflict",
    "EncryptionError",
    "FINAL_STATES",
    "Handler",
    "InternalError",
    "InvalidArgument",
    "JSON",
    "JobContext",
    "JobLog",
    "Keyring",
    "LeaseLost",
    "MissingKey",
    "NondeterminismError",
    "NoRetry",
    "Parked",
    "RetryAfter",
    "Snooze",
    "SignalTimeout",
    "StepError",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "RateLimited",
    "SundialError",
    "TransportError",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMediaType",
    "WaitTimeout",
    "Worker",
    "is_encrypted",
    "job_options",
]
