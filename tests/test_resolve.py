"""seg_data.resolve: the one "module:attr" resolver."""

import os.path

import pytest

from seg_data.resolve import parse_spec, resolve

pytestmark = pytest.mark.light  # torch-free: .ci/run also runs it on the light install


def test_resolves_module_attr_and_dotted_attr():
    assert resolve("os.path:join") is os.path.join
    assert resolve("seg_data.resolve:resolve") is resolve
    assert resolve("collections:OrderedDict.fromkeys") == __import__("collections").OrderedDict.fromkeys
    assert parse_spec(" a.b : c ") == ("a.b", "c")


@pytest.mark.parametrize("bad", ["os.path", ":join", "os.path:", "a:b:c", "", 3])
def test_malformed_spec_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match="expected 'module:attr', got"):
        resolve(bad)


def test_unknown_module_and_attr_are_named_and_chained():
    with pytest.raises(ImportError, match="module 'no_such_mod_ts2' failed to import") as e:
        resolve("no_such_mod_ts2:x")
    assert isinstance(e.value.__cause__, ImportError)
    with pytest.raises(ImportError, match="module 'os.path' has no attribute 'nope'") as e:
        resolve("os.path:nope")
    assert isinstance(e.value.__cause__, AttributeError)
    with pytest.raises(ImportError, match="'collections:OrderedDict' has no attribute 'nope'"):
        resolve("collections:OrderedDict.nope")
