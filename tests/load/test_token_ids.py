"""Token-id prompts (issue 18 item 6): one id per workload word, deterministic, in range; the
completions body carries them; the chat API refuses the option."""

from __future__ import annotations

import json
import random

import pytest

from harness.load.client import TOKEN_ID_RANGE, ClientOptions, StreamClient, token_ids
from harness.load.errors import LoadInputError
from harness.load.spec import RequestSpec
from harness.load.vocabulary import words


def test_one_id_per_word_in_range_and_equal_prefixes_stay_equal() -> None:
    rng = random.Random(3)
    prefix, a, b = words(rng, 300), words(rng, 50), words(rng, 50)
    ia, ib = token_ids(prefix + " " + a), token_ids(prefix + " " + b)
    assert len(ia) == len(ib) == 350
    assert ia[:300] == ib[:300] and ia[300:] != ib[300:]
    lo, hi = TOKEN_ID_RANGE
    assert all(lo <= t < hi for t in ia + ib)
    assert token_ids("notavocabularyword probe123") == token_ids("notavocabularyword probe123")
    assert len(set(token_ids(" ".join(words(random.Random(i), 1) for i in range(400))))) > 100


def test_completions_body_carries_token_ids_and_text_stays_the_default() -> None:
    spec = RequestSpec("r1", "kaba kebe kibi", 3, 4)
    ids = StreamClient("http://127.0.0.1:9", ClientOptions(model="m", prompt_format="token_ids"), max_connections=1)
    text = StreamClient("http://127.0.0.1:9", ClientOptions(model="m"), max_connections=1)
    assert json.loads(ids.body_for(spec))["prompt"] == token_ids("kaba kebe kibi")
    assert json.loads(text.body_for(spec))["prompt"] == "kaba kebe kibi"


@pytest.mark.parametrize("kwargs", [{"prompt_format": "token_ids", "api": "chat"}, {"prompt_format": "ids"},
                                    {"prompt_format": "token_ids", "token_id_range": (10, 10)}])
def test_bad_options_are_input_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(LoadInputError):
        ClientOptions(model="m", **kwargs)  # type: ignore[arg-type]
