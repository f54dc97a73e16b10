"""LLM/VLM judge metrics: VIEScore-style rating (:class:`VLMJudge`) and LLMScore-style
caption-then-compare (:class:`LLMJudge`), over transformers or OpenAI-compatible HTTP backends.

Importing this package does not import torch or transformers (backends load them in ``load``).
"""

from .backends import ChatBackend, ChatRequest, ChatResult, HTTPChatBackend, TransformersChatBackend
from .llmscore import LLMJudge
from .parsing import Judgement, ParseError, Rating, parse_judgement, parse_rating
from .viescore import VLMJudge

__all__ = ["ChatBackend", "ChatRequest", "ChatResult", "HTTPChatBackend", "TransformersChatBackend", "LLMJudge",
           "VLMJudge", "Judgement", "ParseError", "Rating", "parse_judgement", "parse_rating"]
