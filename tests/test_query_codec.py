"""Both codecs satisfy the query layer's typed codec protocol: by isinstance and by compiling real queries."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from connectors.codec import BinnedCodec, Codec
from connectors.text_codec import TextCodec
from queries.codec import CodecQuestion, QueryCodec
from queries.probe_answers import QueryCompileError, compile_query, decode
from queries.spec import QuerySpec


@pytest.fixture(scope="module")
def text_codec() -> TextCodec:
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    lines = ["T buy 101.5 x 2.0 +0.3ms\n", "Q 101.0/101.5 3x4 +1.0ms\n", "will the price go up or down? up down flat"]
    tokenizer.train_from_iterator(lines * 20, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"],
                                                                  show_progress=False))
    return TextCodec(tokenizer)


def test_both_codecs_are_query_codecs(text_codec: TextCodec) -> None:
    for codec in (BinnedCodec(), text_codec):
        assert isinstance(codec, Codec) and isinstance(codec, QueryCodec)
        assert all(isinstance(q, CodecQuestion) for q in codec.questions.values())
    assert len(BinnedCodec().questions) == 5 and dict(text_codec.questions) == {}


def test_binned_codec_compiles_named_questions_and_refuses_free_text() -> None:
    codec = BinnedCodec()
    spec = QuerySpec.from_dict({"name": "dir", "streams": ["*"], "question": "direction_20", "kind": "choice"})
    query = compile_query(spec, codec)
    named = codec.questions["direction_20"]
    assert query.question == tuple(named.tokens) and query.labels == ("down", "flat", "up")
    assert query.answer_ids == tuple(named.answers[label] for label in query.labels)
    assert codec.question_tokens("will it go up?") is None
    text = QuerySpec.from_dict({"name": "free", "streams": ["*"], "question": "will it go up?", "kind": "choice",
                                "choices": ["up", "down"]})
    with pytest.raises(QueryCompileError, match=r"a tick model cannot read free text: it answers direction_20, "):
        compile_query(text, codec)
    assert decode(codec, [*named.tokens, 10_000]) == "question:direction_20 10000"


def test_text_codec_compiles_free_text_questions(text_codec: TextCodec) -> None:
    spec = QuerySpec.from_dict({"name": "dir", "streams": ["*"], "question": "will the price go up or down?",
                                "kind": "choice", "choices": ["up", "down", "flat"]})
    query = compile_query(spec, text_codec)
    assert query.question == tuple(text_codec.question_tokens("will the price go up or down?"))
    assert query.labels == ("up", "down", "flat") and (query.answer_ids or query.candidates)
    named = QuerySpec.from_dict({"name": "n", "streams": ["*"], "question": "direction_20", "kind": "generate"})
    assert compile_query(named, text_codec).question == tuple(text_codec.question_tokens("direction_20"))
    assert decode(text_codec, list(query.question)) == "will the price go up or down?"
