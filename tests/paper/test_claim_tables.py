"""The generated blocks of hand-written pages (the README's claim table, docs/reproducing.md's tables)."""

import os

import pytest

from paper.verdicts.claim_tables import _number, write_block

PAGE = "intro\n<!-- b -->\n{}<!-- e -->\nwritten by hand\n"


def test_a_block_is_replaced_and_the_page_around_it_kept(tmp_path):
    page = tmp_path / "README.md"
    page.write_text(PAGE.format("old\n"))
    write_block(page, "<!-- b -->", "<!-- e -->", "new\n")
    assert page.read_text() == PAGE.format("new\n")


def test_an_interrupted_rewrite_leaves_the_page_whole(tmp_path, monkeypatch):
    page = tmp_path / "README.md"
    page.write_text(PAGE.format("old\n"))

    def interrupted(fd):  # Ctrl-C with the new text half on the disk
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_block(page, "<!-- b -->", "<!-- e -->", "new\n" * 10_000)
    assert page.read_text() == PAGE.format("old\n")
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]  # no half-written file left beside it


@pytest.mark.parametrize("effect, shown",
                         [("0.856-0.864", "0.86"), ("0.71-0.77", "0.71-0.77"), ("1.002-1.11", "1.00-1.11")])
def test_an_effect_whose_two_medians_round_alike_is_one_number(effect, shown):
    assert _number(effect) == shown
