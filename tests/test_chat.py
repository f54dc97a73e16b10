"""The one chat-model layer (metrics_adapters.chat): dtype names, old option names, one naming."""

from __future__ import annotations

import logging

import pytest

from metrics_adapters.chat import (
    ChatModel,
    ChatRequest,
    HTTPChatModel,
    TransformersChatModel,
    torch_dtype,
)


def test_unknown_dtype_lists_the_valid_ones():
    torch = pytest.importorskip("torch")
    assert torch_dtype("fp16") is torch.float16 and torch_dtype("bfloat16") is torch.bfloat16
    assert torch_dtype(None) is None
    with pytest.raises(ValueError, match=r"expected dtype one of \['fp32', 'float32', 'fp16'.*got 'half'"):
        torch_dtype("half")


def test_unknown_dtype_fails_before_any_file_is_read(tmp_path):
    pytest.importorskip("transformers")
    from metrics_adapters.qa.vqa import BlipVQA

    for make in (lambda: TransformersChatModel(str(tmp_path / "none"), kind="lm"),
                 lambda: BlipVQA(str(tmp_path / "none"))):
        with pytest.raises(ValueError, match="expected dtype one of"):
            make().load("cpu", "fp8")


def test_old_option_names_still_work_and_both_names_is_an_error(caplog):
    from metrics_adapters.judges.backends import HTTPChatBackend
    from metrics_adapters.qa.vqa import OpenAIVQA

    with caplog.at_level(logging.WARNING):
        b = HTTPChatBackend("http://127.0.0.1:9/v1", "m", api_key_env=None, max_tokens=7, params_billion=7)
    assert b.max_new_tokens == 7 and b.n_params() == 7e9 and b.params() == 7e9
    assert "'max_tokens' is now called 'max_new_tokens'" in caplog.text
    assert HTTPChatBackend("http://127.0.0.1:9/v1", "m", api_key_env=None).max_new_tokens == 256
    with pytest.raises(ValueError, match="give only max_new_tokens"):
        HTTPChatBackend("http://127.0.0.1:9/v1", "m", api_key_env=None, max_tokens=7, max_new_tokens=8)
    v = OpenAIVQA("http://127.0.0.1:9/v1", "m", api_key_env=None, max_tokens=5)
    assert v.settings()["max_new_tokens"] == 5 and v.chat.max_new_tokens == 5
    assert OpenAIVQA("http://127.0.0.1:9/v1", "m", api_key_env=None).settings()["max_new_tokens"] == 20


def test_one_naming_across_judges_vqa_and_question_generation():
    from metrics_adapters.judges.backends import (
        HTTPChatBackend,
        TransformersChatBackend,
    )
    from metrics_adapters.qa.generation import HFCausalLM, OpenAIChatLM
    from metrics_adapters.qa.vqa import ChatVQA, OpenAIVQA

    url = "http://127.0.0.1:9/v1"
    models = [HTTPChatBackend(url, "m", api_key_env=None), TransformersChatBackend("x", kind="lm"),
              ChatVQA("x").chat, OpenAIVQA(url, "m", api_key_env=None).chat, HFCausalLM("x").chat,
              OpenAIChatLM(url, "m", api_key_env=None).chat]
    for m in models:
        assert isinstance(m, ChatModel)
        assert "max_new_tokens" in m.settings() and "max_tokens" not in m.settings()
        assert isinstance(m.usage(), dict)  # never None
        assert m.n_params() is None  # unknown before loading / unless configured
    assert OpenAIChatLM(url, "m", api_key_env=None).usage() == {}


def test_text_only_models_refuse_images():
    from PIL import Image

    m = HTTPChatModel("http://127.0.0.1:9/v1", "m", api_key_env=None, vision=False)
    with pytest.raises(ValueError, match="text-only"):
        m.generate([ChatRequest("x", images=(Image.new("RGB", (2, 2)),))])
    with pytest.raises(ValueError, match="use_chat_template: false"):
        TransformersChatModel("x", kind="vlm", use_chat_template=False)
