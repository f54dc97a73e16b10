"""OpenAI-compatible HTTP chat client shared by every API-backed metric (judges, VQA, question
generation): timeouts, retries with exponential backoff and jitter, a concurrency limit, token
and cost accounting, and an API key read from an environment variable (never from a config file,
never written to an output or a log).

Imports only ``requests`` (no torch).
"""

from .client import (
    APIError,
    ChatClient,
    ChatResponse,
    InvalidAPIKeyError,
    MissingAPIKeyError,
    UsageMeter,
    image_data_url,
    user_message,
)

__all__ = ["APIError", "ChatClient", "ChatResponse", "InvalidAPIKeyError", "MissingAPIKeyError", "UsageMeter", "image_data_url",
           "user_message"]
