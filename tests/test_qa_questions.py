"""Question files and DSG dependency graphs: loading, validation errors, round trips."""

from __future__ import annotations

import pytest

from metrics_adapters.qa.questions import (
    DependencyError,
    Question,
    QuestionError,
    QuestionSet,
    build_dependency_graph,
    load_question_csv,
    parse_choices,
    parse_parents,
    save_question_csv,
)

DSG_HEADER = "id,prompt,question_id,parent_question_id,question,choices,answer\n"


def _write(tmp_path, text, name="q.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_parse_parents_cells():
    assert parse_parents("-1") == ()
    assert parse_parents("3") == ("3",)
    assert parse_parents("0-1") == ("0", "1")
    assert parse_parents("2-0") == ("2", "0")
    for bad in ("0--1", "a", "1-1", "-"):
        with pytest.raises(QuestionError):
            parse_parents(bad, where="row 2")


def test_parse_choices():
    assert parse_choices("yes|no") == ("yes", "no")
    assert parse_choices(" red | blue|green ") == ("red", "blue", "green")
    with pytest.raises(QuestionError, match="at least two"):
        parse_choices("yes")
    with pytest.raises(QuestionError):
        parse_choices("yes||no")


def test_graph_validation_errors_name_the_problem():
    q = lambda i, p=(): Question(i, f"q{i}?", ("yes", "no"), "yes", p)  # noqa: E731
    with pytest.raises(DependencyError, match=r"parent '7' is not a question of the set"):
        build_dependency_graph([q("0"), q("1", ("7",))], where="SEG 4")
    with pytest.raises(DependencyError, match="cycle 0 -> 1 -> 2 -> 0|cycle 1 -> 2 -> 0 -> 1|cycle 2 -> 0 -> 1 -> 2"):
        build_dependency_graph([q("0", ("2",)), q("1", ("0",)), q("2", ("1",))])
    with pytest.raises(DependencyError, match="other than itself"):
        build_dependency_graph([q("0", ("0",))])
    with pytest.raises(DependencyError, match="unique question ids"):
        build_dependency_graph([q("0"), q("0")])


def test_load_dsg_file_with_multi_parent(tmp_path):
    p = _write(tmp_path, DSG_HEADER + "\n".join([
        '5,"A boy, a dog",0,-1,Is there a boy?,yes|no,yes',
        '5,"A boy, a dog",1,-1,Is there a dog?,yes|no,yes',
        '5,"A boy, a dog",2,0-1,Is the boy with the dog?,yes|no,yes',
        '6,A cat,0,-1,Is there a cat?,yes|no,yes']) + "\n")
    sets = load_question_csv(p)
    assert list(sets) == ["5", "6"]
    s = sets["5"]
    assert s.kind == "dsg" and s.prompt == "A boy, a dog" and s.ids == ["0", "1", "2"]
    assert s.questions[2].parents == ("0", "1")
    assert sorted(s.graph().edges) == [("0", "2"), ("1", "2")]


def test_load_rejects_cycles_and_unknown_parents_with_file_and_seg(tmp_path):
    p = _write(tmp_path, DSG_HEADER + "3,P,0,1,a?,yes|no,yes\n3,P,1,0,b?,yes|no,yes\n")
    with pytest.raises(DependencyError, match=r"q.csv, SEG 3: expected an acyclic"):
        load_question_csv(p)
    p = _write(tmp_path, DSG_HEADER + "3,P,0,-1,a?,yes|no,yes\n3,P,1,4,b?,yes|no,yes\n")
    with pytest.raises(DependencyError, match=r"SEG 3, question 1: parent '4'"):
        load_question_csv(p)


def test_load_rejects_bad_rows(tmp_path):
    p = _write(tmp_path, "id,prompt,question_id,question,answer\n0,P,0,a?,yes\n")
    with pytest.raises(QuestionError, match=r"missing \['choices'\]"):
        load_question_csv(p)
    p = _write(tmp_path, "id,prompt,question_id,question,choices,answer\n0,P,0,a?,yes,yes\n")
    with pytest.raises(QuestionError, match=r"row 2 \(SEG 0, question 0\).*at least two"):
        load_question_csv(p)
    p = _write(tmp_path, "id,prompt,question_id,question,choices,answer\n0,P,0,a?,yes|no,yes\n0,Q,1,b?,yes|no,yes\n")
    with pytest.raises(QuestionError, match="one prompt per SEG"):
        load_question_csv(p)
    with pytest.raises(FileNotFoundError):
        load_question_csv(tmp_path / "nope.csv")


def test_answer_outside_choices_is_kept_with_a_warning(tmp_path):
    p = _write(tmp_path, "id,prompt,question_id,question,choices,answer\n0,P,0,how many?,1|2|3|4,group\n")
    s = load_question_csv(p)["0"]
    assert s.questions[0].answer == "group"
    assert len(s.warnings) == 1 and "never be matched" in s.warnings[0]


def test_save_and_load_round_trip(tmp_path):
    qs = (Question("0", "Is there a boy?", ("yes", "no"), "yes"),
          Question("1", "Is the shirt green?", ("yes", "no"), "yes", parents=("0",)),
          Question("2", "Is he, or she, running?", ("yes", "no"), "yes", parents=("0", "1")))
    out = save_question_csv({"12": QuestionSet("12", 'A boy, "green" shirt', qs, kind="dsg")}, tmp_path / "o.csv")
    assert out.read_text().splitlines()[0] == DSG_HEADER.strip()
    back = load_question_csv(out)["12"]
    assert back.questions == qs and back.prompt == 'A boy, "green" shirt'
    tifa = QuestionSet("0", "p", (Question("0", "what color?", ("red", "blue"), "red"),), kind="tifa")
    out = save_question_csv([tifa], tmp_path / "t.csv")
    assert "parent_question_id" not in out.read_text().splitlines()[0]
    assert load_question_csv(out)["0"].questions[0].choices == ("red", "blue")


@pytest.mark.shared
def test_released_files_load(ts2_dir):
    tifa = load_question_csv(ts2_dir / "tifa_questions.csv")
    dsg = load_question_csv(ts2_dir / "dsg_questions.csv")
    assert len(tifa) == len(dsg) == 165
    assert sum(len(s) for s in tifa.values()) == 1205
    assert sum(len(s) for s in dsg.values()) == 898
    assert all(q.is_yes_no and q.answer == "yes" for s in dsg.values() for q in s)
    multi = [q for s in dsg.values() for q in s if len(q.parents) > 1]
    assert len(multi) > 100  # "0-1" and friends
    # The four released TIFA questions whose answer is not a choice are kept and flagged.
    assert sum(len(s.warnings) for s in tifa.values()) == 4
