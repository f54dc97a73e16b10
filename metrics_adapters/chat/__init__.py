"""One chat-model layer for every text-generating model of ts2 (judges, VQA chat backends,
question generation): a protocol (:class:`ChatModel`), a local transformers implementation
(:class:`TransformersChatModel`), an OpenAI-compatible HTTP one (:class:`HTTPChatModel`); the
one transformers loader (:func:`load_pretrained`, :func:`torch_dtype`) lives in
:mod:`metrics_adapters.hub` and is re-exported here.

Importing this package imports neither torch nor transformers.
"""

from ..hub import DTYPES, load_pretrained, torch_dtype
from .base import ChatModel, ChatRequest, ChatResult, renamed_options
from .http import HTTPChatModel
from .loading import count_params
from .local import TransformersChatModel

__all__ = ["ChatModel", "ChatRequest", "ChatResult", "HTTPChatModel", "TransformersChatModel", "DTYPES",
           "count_params", "load_pretrained", "torch_dtype", "renamed_options"]
