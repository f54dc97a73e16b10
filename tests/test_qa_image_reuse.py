"""BLIP-style VQA backends encode each distinct image of a batch once (metrics_adapters.qa.image_reuse).

The reference for every answer is the model's own ``generate`` on that one image and question,
called directly through transformers (no ts2 code), so reuse may not change a single token.
"""

from __future__ import annotations

import pytest
from qa_tiny import noise_images

from metrics_adapters.qa.image_reuse import distinct_images, repeat_vision_outputs
from metrics_adapters.qa.vqa import BlipVQA, InstructBlipVQA, VQARequest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# lengths from 4 to 17 tokens: a batch pads most of them
QUESTIONS = ["is there a dog?", "what color is the car that is parked next to the small red house on the left?",
             "how many people are there?"]


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    from qa_tiny import build_tiny_blip, build_tiny_instructblip

    d = tmp_path_factory.mktemp("reuse")
    return {"blip": build_tiny_blip(d / "blip"), "instructblip": build_tiny_instructblip(d / "iblip")}


def _requests(n_images=3):
    imgs = noise_images(n_images, seed=7)
    # an image's questions together, as the engine hands them over, plus one image revisited
    reqs = [VQARequest(q, image=im, image_id=f"im{i}") for i, im in enumerate(imgs) for q in QUESTIONS]
    reqs.append(VQARequest("is it raining?", image=imgs[0], image_id="im0"))
    return reqs


def _reference(backend_cls, path, reqs, template):
    """One ``generate`` per (image, question) with the transformers processor and model alone."""
    from transformers import AutoProcessor

    cls = {BlipVQA: "BlipForQuestionAnswering", InstructBlipVQA: "InstructBlipForConditionalGeneration"}[backend_cls]
    import transformers

    net = getattr(transformers, cls).from_pretrained(path).eval()
    proc = AutoProcessor.from_pretrained(path)
    if getattr(net.config, "use_decoder_only_language_model", False):
        proc.tokenizer.padding_side = "left"
    out = []
    for r in reqs:
        inp = proc(images=[r.image], text=[template.format(question=r.question)], return_tensors="pt")
        with torch.no_grad():
            ids = net.generate(**inp, max_new_tokens=4, num_beams=1, do_sample=False)
        if getattr(net.config, "use_decoder_only_language_model", False):
            ids = ids[:, inp["input_ids"].shape[1]:]
        out.append(proc.batch_decode(ids, skip_special_tokens=True)[0].strip())
    return out


def _vision_rows(backend):
    """Record the batch size of every vision-tower call of a loaded backend."""
    rows: list[int] = []
    backend._net.vision_model.register_forward_hook(lambda m, a, o: rows.append(int(o[0].shape[0])))
    return rows


@pytest.mark.parametrize("kind", ["blip", "instructblip"])
@pytest.mark.parametrize("batch_size", [1, 4, 10])
def test_answers_equal_one_generate_per_question(tiny_models, kind, batch_size):
    cls = {"blip": BlipVQA, "instructblip": InstructBlipVQA}[kind]
    reqs = _requests()
    backend = cls(str(tiny_models[kind]), max_new_tokens=4, batch_size=batch_size)
    backend.load("cpu")
    rows = _vision_rows(backend)
    got = backend.answer(reqs)
    assert got == _reference(cls, tiny_models[kind], reqs, backend.template)
    # each batch encodes its distinct images once: 10 requests over 3 images (batch 4: 2+2+2)
    expected = [len(distinct_images([r.image for r in reqs[i:i + batch_size]])[0])
                for i in range(0, len(reqs), batch_size)]
    assert rows == expected
    assert sum(rows) == {1: 10, 4: 6, 10: 3}[batch_size]


@pytest.mark.parametrize("kind", ["blip", "instructblip"])
def test_logprobs_with_shared_images_equal_separate_copies(tiny_models, kind):
    cls = {"blip": BlipVQA, "instructblip": InstructBlipVQA}[kind]
    backend = cls(str(tiny_models[kind]), batch_size=8)
    backend.load("cpu")
    reqs = _requests()
    shared = backend.answer_logprobs([r.image for r in reqs], [r.question for r in reqs])
    copies = backend.answer_logprobs([r.image.copy() for r in reqs], [r.question for r in reqs])
    assert shared.shape == (len(reqs), 2)
    assert abs(shared - copies).max() < 1e-5


def test_repeat_vision_outputs_repeats_rows_and_checks_the_batch():
    tower = torch.nn.Linear(2, 3)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    with repeat_vision_outputs(tower, [1, 0, 1]):
        y = tower(x)
    assert torch.equal(y, tower(x)[[1, 0, 1]])  # hook removed afterwards: the second call is plain
    with pytest.raises(ValueError, match="expected the vision tower to return 3 images, got a batch of 2"):
        with repeat_vision_outputs(tower, [0, 1, 2]):
            tower(x)
    assert tower(x).shape == (2, 3)  # removed after an error too


def test_distinct_images_is_by_identity():
    a, b = noise_images(2)
    imgs, index = distinct_images([a, b, a, a.copy()])
    assert index == [0, 1, 0, 2] and imgs[0] is a and imgs[1] is b


def test_blip_logprobs_of_a_padded_batch_equal_each_question_alone(tiny_models):
    # transformers' BLIP decoder attends to question padding; grouping by length must undo that
    backend = BlipVQA(str(tiny_models["blip"]), batch_size=16)
    backend.load("cpu")
    reqs = _requests()
    batch = backend.answer_logprobs([r.image for r in reqs], [r.question for r in reqs])
    alone = [backend.answer_logprobs([r.image], [r.question])[0] for r in reqs]
    assert abs(batch - torch.tensor(alone).numpy()).max() < 1e-5
