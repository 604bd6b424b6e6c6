"""report.md readable in a terminal: wide tables split with their condition columns, prose wrapped."""

import pandas as pd

from echo_experiments.report.markdown import tables_within, wrap_prose


def test_a_wide_table_splits_into_tables_each_led_by_the_key_columns():
    frame = pd.DataFrame([{"workload": "w", "placement": p, **{f"column_{i}": i for i in range(12)}}
                          for p in ("none", "after_batching")])
    text = tables_within(frame, {}, ["workload", "placement"], width=80)
    parts = [part.splitlines() for part in text.split("\n\n")]
    assert len(parts) > 1 and all(len(lines[0]) <= 80 for lines in parts)
    assert all(lines[0].startswith("| workload | placement |") and len(lines) == 4 for lines in parts)
    columns = [c.strip() for lines in parts for c in lines[0].strip("|").split("|")[2:]]
    assert columns == [f"column_{i}" for i in range(12)]  # every column once, in order
    assert tables_within(frame.iloc[:, :4], {}, ["workload"], width=200).count("| workload |") == 1


def test_prose_wraps_and_tables_headings_and_code_stay_as_they_are():
    long = "word " * 60
    table = "| " + " | ".join(["cell"] * 40) + " |"
    text = "\n".join(["# " + long, long, "- " + long, table, "```", long, "```"])
    lines = wrap_prose(text, width=50).split("\n")
    assert lines[0] == "# " + long and table in lines and lines.count(long) == 1  # the one in the code block
    prose = [line for line in lines if line not in ("# " + long, table, long, "```")]
    assert all(len(line) <= 50 for line in prose)
    assert " ".join(prose).split() == long.split() + ["-"] + long.split()  # the paragraph, then the item
    bullet = [line for line in prose if line.startswith("- ")]
    assert len(bullet) == 1 and prose[prose.index(bullet[0]) + 1].startswith("  word")
