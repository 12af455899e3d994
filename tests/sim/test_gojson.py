"""The simulator's JSON encoding: what Go's encoding/json writes, whichever encoder path a value takes."""

import json

from pytest_topsail.sim.machinery import gojson


def test_objects_are_compact_utf8_with_the_html_characters_escaped_as_go_does():
    raw = gojson.dumps({"metadata": {"name": "a", "annotations": {"note": "x<y>&z é \u2028"}}, "n": [1, 2.5, True]})
    assert raw == ('{"metadata":{"name":"a","annotations":{"note":"x\\u003cy\\u003e\\u0026z é \\u2028"}},'
                   '"n":[1,2.5,true]}').encode()
    assert json.loads(raw)["metadata"]["annotations"]["note"] == "x<y>&z é \u2028"


def test_values_orjson_refuses_are_written_the_same_way():
    # a YAML body can carry integer keys and integers beyond 64 bits
    raw = gojson.dumps({"data": {1: "one"}, "big": 2**70, "text": "<é>", "nan": float("nan")})
    assert raw == '{"data":{"1":"one"},"big":1180591620717411303424,"text":"\\u003cé\\u003e","nan":null}'.encode()
