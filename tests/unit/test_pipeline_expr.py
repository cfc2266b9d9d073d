"""The `when` language: what it computes, what it refuses, and that it runs nothing."""

from __future__ import annotations

from typing import Any

import pytest

from corral.domain.pipelines import expr, parser

VALUES: dict[tuple[str, int | None, str], Any] = {
    ("eval", None, "accuracy"): 0.93, ("eval", None, "val/loss"): 0.4,
    ("train", 0, "loss"): 0.2, ("train", 1, "loss"): 0.3,
    ("params", None, "mode"): "full", ("params", None, "epochs"): 100,
}


def lookup(ref: expr.Ref) -> Any:
    try:
        return VALUES[(ref.task, ref.item, ref.name)]
    except KeyError:
        raise expr.EvalError(f"no {ref}") from None


@pytest.mark.parametrize(("text", "expected"), [
    ("eval.accuracy >= 0.9", True),
    ("eval.accuracy > 0.95", False),
    ("eval.accuracy >= 0.9 and params.mode == 'full'", True),
    ("train[0].loss < train[1].loss", True),
    ('not (eval["val/loss"] > 0.5)', True),
    ("params.epochs * 2 == 200 and params.epochs % 7 == 2", True),
    ("-eval.accuracy < 0", True),
    ("1 + 2 * 3 == 7 and (1 + 2) * 3 == 9", True),
    ("params.mode in ['full', 'quick']", True),
    ("params.mode not in ['full']", False),
    ("'ul' in params.mode", True),
    ("true or eval.nothing > 1", True),  # `or` stops at its first true
    ("false and eval.nothing > 1", False),
    ("1 < 2 < 3", True),
    ('"a" < "b"', True),
    ("1 == 1.0", True),
    ("'1' == 1", False),
])
def test_a_condition_computes_what_it_says(text: str, expected: bool) -> None:
    assert parser.parse(text).evaluate(lookup) is expected


def test_a_condition_names_the_references_it_makes() -> None:
    refs = parser.parse("train[1].loss < eval.top1.acc or params.mode == 'x'").refs
    assert [str(r) for r in refs] == ["train[1].loss", "eval.top1.acc", "params.mode"]
    assert str(parser.parse('eval["val/loss"] > 0').refs[0]) == 'eval["val/loss"]'


@pytest.mark.parametrize(("text", "said"), [
    ("eval.accuracy >", "ends early"),
    ("eval.accuracy >= 0.9 and", "ends early"),
    ("(eval.accuracy", "expected ')'"),
    ("eval", "names no metric"),
    ("eval.accuracy = 1", "unexpected character '='"),
    ("params[0].x > 1", "params.NAME"),
    ("__import__('os').system('true')", "names no metric"),
    ("eval.accuracy; true", "unexpected character ';'"),
    ("1 2", "unexpected at '2'"),
    ("train[x].loss > 1", "names no metric"),
])
def test_what_is_not_a_condition_is_refused_saying_where(text: str, said: str) -> None:
    with pytest.raises(expr.BadExpression) as err:
        parser.parse(text)
    assert said in err.value.message and text in err.value.message


def test_a_condition_is_short_and_shallow() -> None:
    with pytest.raises(expr.BadExpression, match="at most"):
        parser.parse("1 < 2 or " * 200 + "true")
    with pytest.raises(expr.BadExpression, match="nested too deeply"):
        parser.parse("(" * 60 + "true" + ")" * 60)
    with pytest.raises(expr.BadExpression, match="nested too deeply"):
        parser.parse("not " * 60 + "true")


@pytest.mark.parametrize(("text", "said"), [
    ("eval.accuracy", "not true or false"),
    ("eval.accuracy and true", "needs true or false"),
    ("params.mode > 1", "needs numbers"),
    ("eval.accuracy / 0 > 1", "division by zero"),
    ("eval.missing > 1", "no eval.missing"),
    ("1 in 2", "needs a list or a string"),
])
def test_what_cannot_be_evaluated_says_why(text: str, said: str) -> None:
    with pytest.raises(expr.EvalError, match=said):
        parser.parse(text).evaluate(lookup)


def test_a_parameter_is_a_number_when_it_reads_as_one() -> None:
    assert expr.parameter_value("100") == 100
    assert expr.parameter_value("0.5") == 0.5
    assert expr.parameter_value("full") == "full"
    assert expr.parameter_value("1e3") == 1000.0
