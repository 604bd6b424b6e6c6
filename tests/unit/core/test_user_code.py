"""A failure in a user's own code, in one line: the user's frame, not the libraries', and the message in full."""

import json
import traceback

import pytest

from echo_experiments.core import user_code


def users_hook(record):
    return record["pixels"]


def test_the_line_names_the_innermost_frame_of_the_users_code_not_the_librarys():
    with pytest.raises(KeyError) as error:
        json.loads("{}", object_hook=users_hook)  # the user's function called from inside the standard library
    line = users_hook.__code__.co_firstlineno + 1
    assert user_code.failure(error.value, "Mine.decode fails") == (
        f"Mine.decode fails: KeyError: 'pixels' (at {__file__}:{line}, in users_hook: return record[\"pixels\"])")


def test_a_failure_only_in_libraries_is_not_the_users():
    with pytest.raises(ValueError) as error:
        json.loads("{")
    assert user_code.frame(error.value).filename == __file__  # the test's own line called the library
    error.value.__traceback__ = error.value.__traceback__.tb_next  # the library's frames alone
    assert len(traceback.extract_tb(error.value.__traceback__)) > 0
    assert user_code.failure(error.value, "x") is None


def test_tensorflows_wrapping_is_taken_off_the_message():
    error = TypeError("in user code:\n\n    File \"/a.py\", line 3, in augment  *\n        y = x + 1\n\n"
                      "    TypeError: Input 'y' of 'AddV2' Op has type string\n")
    assert user_code.message(error) == "TypeError: Input 'y' of 'AddV2' Op has type string"
    assert user_code.message(ValueError("two\nlines")) == "ValueError: two lines"
