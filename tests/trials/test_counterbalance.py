from __future__ import annotations

import itertools

import pytest

from trials.counterbalance import balanced_latin_square, condition_order, square_rows


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_every_condition_once_per_row_and_per_position(n: int) -> None:
    rows = balanced_latin_square(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    for row in rows:
        assert sorted(row) == list(range(n))
    for position in range(n):
        counts = [sum(row[position] == c for row in rows) for c in range(n)]
        assert len(set(counts)) == 1, f"position {position} unbalanced: {counts}"


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_first_order_carry_over_is_balanced(n: int) -> None:
    rows = balanced_latin_square(n)
    follows = {pair: 0 for pair in itertools.permutations(range(n), 2)}
    for row in rows:
        for before, after in zip(row, row[1:]):
            follows[(before, after)] += 1
    assert len(set(follows.values())) == 1, follows


def test_participants_cycle_through_the_rows() -> None:
    conditions = ["dg", "ng", "apf"]
    orders = [tuple(condition_order(conditions, i)) for i in range(6)]
    assert len(set(orders)) == 6
    assert condition_order(conditions, 6) == condition_order(conditions, 0)
    # across six participants each condition is first exactly twice
    assert sorted(o[0] for o in orders) == ["apf", "apf", "dg", "dg", "ng", "ng"]


@pytest.mark.parametrize("n", range(1, 8))
def test_square_rows_is_the_number_of_rows(n: int) -> None:
    assert square_rows(n) == len(balanced_latin_square(n))
    with pytest.raises(ValueError):
        square_rows(0)
