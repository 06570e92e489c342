"""The drug vocabulary's index is built once and kept in var/cache for the next process
(drugs.identity.vocabulary): what a process reads back is exactly what it would build, a damaged copy is
built again, and a var directory it cannot write costs speed, not names."""

import marshal

import pytest

from drugs import identity


@pytest.fixture
def own_var(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    identity.vocabulary.cache_clear()
    yield tmp_path
    identity.vocabulary.cache_clear()


def test_the_copy_a_process_reads_is_the_index_it_would_build(own_var):
    built = identity.vocabulary()
    copy = identity._vocabulary_copy_path()
    assert copy.parent == own_var / "cache" and copy.exists()
    identity.vocabulary.cache_clear()
    read_back = identity.vocabulary()
    assert read_back == built == identity._build_vocabulary()
    assert read_back["diovan"] == ("valsartan",)
    assert list(copy.parent.iterdir()) == [copy]  # no partial file left behind


SMALL = {"diovan": ("valsartan",), "losartan potassium": ("losartan",)}


@pytest.fixture
def small_build(monkeypatch):
    """The build itself stands in small (3 s each for the real one; the first test reads the real one back)."""
    built = []

    def build():
        built.append(1)
        return dict(SMALL)

    monkeypatch.setattr(identity, "_build_vocabulary", build)
    return built


def test_a_damaged_copy_is_built_again_and_replaced(own_var, small_build):
    copy = identity._vocabulary_copy_path()
    copy.parent.mkdir(parents=True)
    damaged = (b"", b"\x00not marshal", marshal.dumps({"diovan": ("valsartan",)})[:-1], marshal.dumps([1]))
    for n, content in enumerate(damaged, 1):
        copy.write_bytes(content)
        identity.vocabulary.cache_clear()
        assert identity.vocabulary()["diovan"] == ("valsartan",)
        assert len(small_build) == n
        assert marshal.loads(copy.read_bytes()) == SMALL
    identity.vocabulary.cache_clear()
    assert identity.vocabulary() == SMALL
    assert len(small_build) == len(damaged)  # the sound copy was read, not built


def test_a_var_directory_it_cannot_write_still_names_drugs(own_var, small_build, caplog):
    (own_var / "cache").write_text("a file where the cache directory would be")
    assert identity.resolve("Diovan 80 mg tablet").key == "valsartan"
    assert "could not keep a copy" in caplog.text


def test_the_copy_is_named_by_the_vocabulary_release_and_the_rules_and_replaces_the_last(
        own_var, small_build, monkeypatch):
    first = identity._vocabulary_copy_path()
    identity.vocabulary()
    monkeypatch.setattr(identity.importlib.metadata, "version", lambda name: "99.0.0")
    second = identity._vocabulary_copy_path()
    assert second != first
    identity.vocabulary.cache_clear()
    identity.vocabulary()
    assert len(small_build) == 2  # a new release is built, not read from the old copy
    assert list((own_var / "cache").iterdir()) == [second]
