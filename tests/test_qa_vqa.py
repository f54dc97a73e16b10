"""VQA backends: replay files, tiny random BLIP / LLaVA batching, an OpenAI-compatible endpoint, cache keys."""

from __future__ import annotations

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from qa_tiny import noise_images

from metrics_adapters.qa.cache import QACache, answer_key, fingerprint_hash, image_key
from metrics_adapters.qa.vqa import (
    BlipVQA,
    ChatVQA,
    OpenAIVQA,
    ReplayVQA,
    VQAError,
    VQARequest,
    normalize_image_name,
)


# -- replay ---------------------------------------------------------------------------------------------
def test_replay_normalises_image_names_and_keeps_text_cells(tmp_path):
    f = tmp_path / "ans.csv"
    f.write_text("0,000-00.jpg,0,yes\n0,images/000-00.jpg,1,NA\n3,./images/003-08.jpg,0,none\n")
    r = ReplayVQA(str(f))
    assert not r.needs_images and not r.cacheable
    out = r.answer([VQARequest("q", image_id="images/000-00.jpg", seg_id="0", question_id="0"),
                    VQARequest("q", image_id="000-00.jpg", seg_id="0", question_id="1"),
                    VQARequest("q", image_id="images/003-08.jpg", seg_id="3", question_id="0")])
    assert out == ["yes", "NA", "none"]  # "NA"/"none" are answers, not missing values
    assert r.n_model_calls == 0


def test_replay_missing_answer_is_a_per_request_error(tmp_path):
    f = tmp_path / "ans.csv"
    f.write_text("id,image,question_id,raw_answer\n0,images/a.jpg,0,yes\n")  # a header is accepted
    out = ReplayVQA(str(f)).answer([VQARequest("q", image_id="images/a.jpg", seg_id="0", question_id="0"),
                                    VQARequest("q", image_id="images/a.jpg", seg_id="0", question_id="5")])
    assert out[0] == "yes"
    assert isinstance(out[1], VQAError) and "SEG 0, image images/a.jpg, question 5" in str(out[1])


def test_replay_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="recorded answers file"):
        ReplayVQA(str(tmp_path / "none.csv")).load()
    f = tmp_path / "three.csv"
    f.write_text("0,a.jpg,yes\n")
    with pytest.raises(ValueError, match="expected 4 columns"):
        ReplayVQA(str(f)).load()
    f = tmp_path / "dup.csv"
    f.write_text("0,a.jpg,0,yes\n0,images/a.jpg,0,no\n")
    with pytest.raises(ValueError, match="line 2: expected one answer"):
        ReplayVQA(str(f)).load()
    with pytest.raises(ValueError, match="answers=FILE"):
        ReplayVQA("")


def test_replay_fingerprint_is_the_file_content(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("0,x.jpg,0,yes\n")
    b.write_text("0,x.jpg,0,yes\n")
    assert ReplayVQA(str(a)).fingerprint() == ReplayVQA(str(b)).fingerprint()
    b.write_text("0,x.jpg,0,no\n")
    assert ReplayVQA(str(a)).fingerprint() != ReplayVQA(str(b)).fingerprint()


def test_normalize_image_name():
    assert normalize_image_name("images/1.jpg") == normalize_image_name("1.jpg") == normalize_image_name("./images/1.jpg")
    assert normalize_image_name("sub/images/1.jpg") == "sub/images/1.jpg"


# -- cache keys -------------------------------------------------------------------------------------------
def test_answer_keys_separate_what_changes_an_answer():
    img1, img2 = noise_images(2)
    bh = fingerprint_hash(BlipVQA("m").fingerprint())
    k = answer_key(bh, image_key(img1), "is there a dog?", None)
    assert k == answer_key(bh, image_key(img1.copy()), "is there a dog?", None)  # same pixels
    assert k != answer_key(bh, image_key(img2), "is there a dog?", None)
    assert k != answer_key(bh, image_key(img1), "Is there a dog?", None)  # exact question text
    assert k != answer_key(bh, image_key(img1), "is there a dog?", ["yes", "no"])
    for other in (BlipVQA("m2"), BlipVQA("m", revision="abc"), BlipVQA("m", max_new_tokens=5),
                  BlipVQA("m", num_beams=3), BlipVQA("m", template="Q: {question}")):
        assert answer_key(fingerprint_hash(other.fingerprint()), image_key(img1), "is there a dog?", None) != k
    # Batch size changes speed, not answers.
    assert fingerprint_hash(BlipVQA("m", batch_size=3).fingerprint()) == bh
    # Pixels, not file bytes: the same image re-encoded in another mode is another key.
    assert image_key(img1) != image_key(img1.convert("L"))


def test_choices_key_the_cache_only_when_the_prompt_shows_them():
    assert not BlipVQA("m").uses_choices
    assert BlipVQA("m", template="{question} Choices: {choices}").uses_choices


def test_qa_cache_round_trip(tmp_path):
    c = QACache(tmp_path / "qa.sqlite")
    c.put_answers([("k1", "b", "pix:1", "q?", "yes")])
    assert c.get_answers(["k1", "k2"]) == {"k1": "yes"}
    c.close()
    assert QACache(tmp_path / "qa.sqlite").n_answers() == 1  # persisted
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(RuntimeError, match="expected a ts2 QA cache"):
        QACache(bad)


# -- transformers backends on tiny random models --------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_blip(tmp_path_factory):
    pytest.importorskip("transformers")
    from qa_tiny import build_tiny_blip

    return build_tiny_blip(tmp_path_factory.mktemp("blip") / "blip")


def test_blip_answers_do_not_depend_on_batch_size(tiny_blip):
    imgs = noise_images(5, seed=1)
    reqs = [VQARequest(q, image=im) for im, q in zip(imgs, ["is there a dog?", "what color is it?", "how many?",
                                                            "is it red?", "what is this?"], strict=True)]
    a = BlipVQA(str(tiny_blip), max_new_tokens=4, batch_size=1)
    b = BlipVQA(str(tiny_blip), max_new_tokens=4, batch_size=4)
    a.load("cpu")
    b.load("cpu")
    ra, rb = a.answer(reqs), b.answer(reqs)
    assert ra == rb and all(isinstance(x, str) and x for x in ra)
    assert a.n_model_calls == b.n_model_calls == 5
    assert a.n_params() > 1e5


def test_blip_without_image_fails_clearly(tiny_blip):
    b = BlipVQA(str(tiny_blip))
    b.load("cpu")
    with pytest.raises(VQAError, match="expected an image"):
        b.answer([VQARequest("is there a dog?")])


def test_blip_bad_model_path_fails_on_load(tmp_path):
    pytest.importorskip("transformers")
    from metrics_adapters.hub import ModelUnavailableError

    # A folder that is not there: one line naming it and the key that points at a local copy.
    with pytest.raises(ModelUnavailableError, match=r"'.*missing' to be a local folder.*metric\.vqa\.model=DIR"):
        BlipVQA(str(tmp_path / "missing")).load("cpu")
    (tmp_path / "empty").mkdir()  # there, but without the model's files: the loader's error
    with pytest.raises(RuntimeError, match=r"BlipVQA: could not load \w+ '.*empty'"):
        BlipVQA(str(tmp_path / "empty")).load("cpu")


def test_instructblip_answers_do_not_depend_on_batch_size(tmp_path):
    pytest.importorskip("transformers")
    from qa_tiny import build_tiny_instructblip

    from metrics_adapters.qa.vqa import InstructBlipVQA

    d = build_tiny_instructblip(tmp_path / "iblip")
    reqs = [VQARequest(q, image=im) for q, im in zip(["is there a dog?", "what color is it?", "how many?"],
                                                     noise_images(3, seed=1), strict=True)]
    a, b = InstructBlipVQA(str(d), max_new_tokens=4, batch_size=1), InstructBlipVQA(str(d), max_new_tokens=4, batch_size=3)
    a.load("cpu")
    b.load("cpu")
    assert a.answer(reqs) == b.answer(reqs)
    assert a.settings()["template"] == "Question: {question} Short answer:"


def test_llava_style_chat_backend_batches_with_left_padding(tmp_path):
    pytest.importorskip("transformers")
    from qa_tiny import build_tiny_llava

    d = build_tiny_llava(tmp_path / "llava")
    imgs = noise_images(3, seed=2)
    reqs = [VQARequest(q, ("yes", "no"), image=im) for im, q in zip(imgs, ["is there a dog?", "is it red?", "a cat?"], strict=True)]
    one = ChatVQA(str(d), max_new_tokens=3, batch_size=1, system_prompt="Answer briefly.")
    many = ChatVQA(str(d), max_new_tokens=3, batch_size=3, system_prompt="Answer briefly.")
    one.load("cpu")
    many.load("cpu")
    assert one.answer(reqs) == many.answer(reqs)
    conv = one.conversation(reqs[0])
    assert conv[0]["role"] == "system" and conv[1]["content"][0] == {"type": "image"}
    assert ChatVQA("x").fingerprint() != ChatVQA("x", system_prompt="Answer briefly.").fingerprint()


# -- OpenAI-compatible endpoint -----------------------------------------------------------------------------
class _Server:
    """A local /chat/completions endpoint that answers from the request and records it."""

    def __init__(self):
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append((self.path, self.headers.get("Authorization"), body))
                text = body["messages"][-1]["content"][0]["text"]
                if "fail" in text:
                    self.send_response(400)
                    self.end_headers()
                    self.wfile.write(b'{"error": "bad request"}')
                    return
                out = json.dumps({"choices": [{"message": {"content": " Yes "}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_openai_backend_sends_base64_images_and_isolates_failures(monkeypatch):
    monkeypatch.setenv("TS2_TEST_VQA_KEY", "sk-test-123")
    srv = _Server()
    try:
        b = OpenAIVQA(srv.url, "vision-model", api_key_env="TS2_TEST_VQA_KEY", max_retries=0, max_concurrency=2)
        b.load("cpu")
        img = noise_images(1, size=8)[0]
        out = b.answer([VQARequest("is there a dog?", image=img, image_id="a.png"),
                        VQARequest("please fail", image=img, image_id="b.png")])
    finally:
        srv.close()
    assert out[0] == "Yes"
    assert isinstance(out[1], VQAError) and "b.png" in str(out[1]) and "400" in str(out[1])
    path, auth, body = next(s for s in srv.seen if "dog" in json.dumps(s[2]))
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test-123"
    assert body["model"] == "vision-model" and body["temperature"] == 0.0 and body["max_tokens"] == 20
    parts = body["messages"][-1]["content"]
    assert parts[0]["text"] == "is there a dog? Answer with a single word or phrase."
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    import numpy as np
    from PIL import Image

    sent = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert np.array_equal(np.asarray(sent.convert("RGB")), np.asarray(img))  # lossless
    assert "sk-test" not in json.dumps(b.fingerprint())


def test_openai_backend_needs_its_key(monkeypatch):
    monkeypatch.delenv("TS2_TEST_MISSING_KEY", raising=False)
    from metrics_adapters.api import MissingAPIKeyError

    with pytest.raises(MissingAPIKeyError, match="TS2_TEST_MISSING_KEY"):
        OpenAIVQA("http://127.0.0.1:9/v1", "m", api_key_env="TS2_TEST_MISSING_KEY").load()
