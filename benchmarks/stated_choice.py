"""The stated-choice rule on the released raw answers: agreement and cost (issue 29).

Run by hand (numbers in docs/qa.md, "Answer matching")::

    python benchmarks/stated_choice.py                      # ../shared/ts2, pypi:all-mpnet-base-v2
    python benchmarks/stated_choice.py --shared DIR --model FOLDER

For every released raw-answer file (BLIP1 and LLaVA, TIFA and DSG questions) it takes the
questions that are not yes/no and, among their answers that state exactly one choice as a whole
word or phrase, not negated -- counted here by the issue's plain definition, independently of the
rule: the choice's normalised text as a whole phrase in the normalised answer, longer choices
first, no negation word in its clause; no plurals, no number words -- the share whose
recorded choice equals it, for ``yes_no=rules`` without the rule (before), with it (after), and
``yes_no=paper``.

Cost: the matcher's time on all LLaVA TIFA answers (fresh embeddings, every choice and answer
encoded; the answers of yes/no questions included) against the time of the rule alone on the
same answers; and, as the worst case, against the matcher with every embedding cached.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

from metrics_adapters.qa import matching
from metrics_adapters.qa.matching import AnswerMatcher, is_yes_no_question, normalize_answer, stated_choice
from metrics_adapters.qa.vqa import ReplayVQA

_NEG = re.compile(r"\b(?:not|no|never|without|none|nothing|neither|nor|cannot)\b|n't\b")
_CLAUSE = re.compile(r"[.,;:!?]|\b(?:but|however|although|though|whereas|while|which|as|because|since|rather)\b")


def issue_stated(answer: str, choices: list[str]) -> int | None:
    """The index of the one choice the answer states by the issue's plain definition, else None."""
    a = normalize_answer(answer)
    hits = []
    for i, c in enumerate(choices):
        nc = normalize_answer(c)
        if nc:
            hits += [(m.end() - m.start(), m.start(), i)
                     for m in re.finditer(r"(?<![a-z0-9])" + re.escape(nc) + r"(?![a-z0-9])", a)]
    taken: list[tuple[int, int]] = []
    found: dict[int, bool] = {}
    for n, s, i in sorted(hits, key=lambda h: (-h[0], h[1])):
        if any(s < e and b < s + n for b, e in taken):
            continue
        taken.append((s, s + n))
        clause_start = max([m.end() for m in _CLAUSE.finditer(a, 0, s)], default=0)
        clause_end = min([m.start() for m in _CLAUSE.finditer(a, s + n)], default=len(a))
        found[i] = found.get(i, False) or bool(_NEG.search(a, clause_start, clause_end))
    if len(found) != 1:
        return None
    (i, neg), = found.items()
    return None if neg else i


def load(shared: Path, model: str, kind: str) -> pd.DataFrame:
    q = pd.read_csv(shared / f"{kind}_questions.csv", dtype=str, keep_default_na=False)
    table = ReplayVQA.read(shared / "released" / f"{model}_{kind}_raw_answers.csv")
    a = pd.DataFrame([(seg, qid, ans) for (seg, _, qid), ans in table.items()],
                     columns=["id", "question_id", "vqa_answer"])
    df = a.merge(q, on=["id", "question_id"], how="inner", validate="many_to_one")
    df["choice_list"] = df.choices.str.split("|")
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "ts2")
    ap.add_argument("--model", default="pypi:all-mpnet-base-v2")
    ap.add_argument("--cost-only", action="store_true", help="skip the agreement table")
    args = ap.parse_args()
    if not args.cost_only:
        agreement(args)
    cost(args)


def agreement(args: argparse.Namespace) -> None:

    modes = {"before": dict(yes_no="rules", stated_choices=False), "after": dict(yes_no="rules"),
             "paper": dict(yes_no="paper")}
    print("| answers | multi-choice answers | state one choice (not negated) | before | after | paper |")
    print("|---|---|---|---|---|---|")
    for model in ("blip1", "llava"):
        for kind in ("tifa", "dsg"):
            path = args.shared / "released" / f"{model}_{kind}_raw_answers.csv"
            if not path.exists():
                continue
            df = load(args.shared, model, kind)
            mc = df[~df.choice_list.map(is_yes_no_question)]
            if mc.empty:
                print(f"| {model} {kind} | 0 | - | - | - | - |")
                continue
            target = [issue_stated(a, c) for a, c in zip(mc.vqa_answer, mc.choice_list, strict=True)]
            keep = [k for k, t in enumerate(target) if t is not None]
            cells = []
            rules_after = None
            for name, kw in modes.items():
                m = AnswerMatcher(model=args.model, **kw)
                res = m.match(list(mc.vqa_answer), list(mc.choice_list), list(mc.answer))
                ok = sum(res[k].choice == mc.choice_list.iloc[k][target[k]] for k in keep)
                cells.append(f"{ok}/{len(keep)} ({100 * ok / len(keep):.2f}%)")
                if name == "after":
                    rules_after = res
            print(f"| {model} {kind} | {len(mc)} | {len(keep)} | " + " | ".join(cells) + " |")
            rules = pd.Series([r.rule for r in rules_after]).value_counts().to_dict()
            reasons = pd.Series([stated_choice(a, c)[1] for a, c in zip(mc.vqa_answer, mc.choice_list, strict=True)])
            print(f"|   rules: {rules}; stated_choice reasons: {reasons.value_counts().to_dict()} |")
            misses = [(mc.vqa_answer.iloc[k], mc.choices.iloc[k], rules_after[k].choice, rules_after[k].rule)
                      for k in keep if rules_after[k].choice != mc.choice_list.iloc[k][target[k]]]
            for miss in misses[:20]:
                print("|   miss:", miss, "|")



def cost(args: argparse.Namespace) -> None:
    """Cost on the TS2 TIFA questions (LLaVA's answers): the whole matcher, then the rule alone."""
    df = load(args.shared, "llava", "tifa")
    answers, choices, expected = list(df.vqa_answer), list(df.choice_list), list(df.answer)
    matching._SHARED_EMBEDDINGS.clear()
    m = AnswerMatcher(model=args.model)
    m.load()
    t0 = time.perf_counter()
    m.match(answers, choices, expected)
    t_matcher = time.perf_counter() - t0
    mc = [(a, c) for a, c in zip(answers, choices, strict=True) if not is_yes_no_question(c)]
    matching._choice_patterns.cache_clear()
    t0 = time.perf_counter()
    for a, c in mc:
        stated_choice(a, c)
    t_rule = time.perf_counter() - t0
    print(f"\nmatcher on {len(answers)} LLaVA TIFA answers ({m.n_encoded} texts embedded): {t_matcher:.2f} s; "
          f"stated_choice on its {len(mc)} multi-choice answers: {t_rule:.3f} s "
          f"({100 * t_rule / t_matcher:.2f}% of the matcher)")
    # The worst case: every embedding already cached (an instant encoder), only the rules left.
    m = AnswerMatcher(model="instant", encoder=lambda texts: np.ones((len(texts), 8)))
    m.match(answers, choices, expected)
    t0 = time.perf_counter()
    m.match(answers, choices, expected)
    t_warm = time.perf_counter() - t0
    print(f"matcher with every embedding cached: {t_warm:.3f} s; the rule is {100 * t_rule / t_warm:.1f}% of that")


if __name__ == "__main__":
    main()
