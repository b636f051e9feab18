"""The one table of what goes together (mt.compatibility): the first clash given is named, in
the table's order, and the command line and the server refuse by the same entry."""

import pytest

from mt.compatibility import NOT_WITH, OWN_SEARCH, first_clash, own_search_only
from mt.config import DecodeConfig
from mt.serve.access import ClientError
from mt.serve.documents import check_document, wanted


def test_the_first_clash_given_is_named_in_the_tables_order():
    assert first_clash("documents", {"workers": True, "nbest": True}) == "nbest"
    assert first_clash("documents", {"prefix": False, "unknown": True}) is None
    assert all(len(set(v)) == len(v) for v in NOT_WITH.values())


def test_the_server_refuses_what_the_command_line_refuses(monkeypatch):
    nbest = DecodeConfig(beam=2, nbest=2)
    with pytest.raises(ClientError, match="a document: not with nbest"):
        check_document(nbest)
    monkeypatch.setitem(NOT_WITH, "documents", ("prefix", "workers"))  # one entry decides
    check_document(nbest)
    assert wanted("html", None, False, nbest)


def test_outputs_of_mt_s_own_search_are_named_as_the_translator_refuses_them():
    assert own_search_only(OWN_SEARCH["align"]).startswith("decode.align: word alignments "
                                                           "come from mt's own search")
