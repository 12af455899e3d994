"""``parse_yaml``: what ``yaml.safe_load`` gives (C parser when available), faster on case files, and refusing a key
given twice in one mapping (PyYAML keeps the last one silently: a second top-level ``tests:`` would wipe the first).

Case files hold thousands of small mappings of plain scalars. Composing them into PyYAML nodes costs several times
the parse itself (a node and two marks per scalar, and the garbage collector walking them all), so documents are
built straight from the parser's events: strings as they come, other scalars through the safe constructor (memoized:
those values are immutable), lists, mappings and aliases to finished values. Anything else (merge keys, explicit
tags on collections, complex keys, a key given twice, an error) is parsed again by the node path below, which
handles every document as ``safe_load`` does and words the errors.
"""

from __future__ import annotations

from typing import Any

_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"


_NO_KEY = object()


class _Unusual(Exception):
    """The document needs the node path."""


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, a key given twice in one mapping being an error (see the module doc)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        return _from_events(loader)
    except Exception:  # noqa: BLE001 - the node path parses the document again and raises its own, worded error
        pass
    finally:
        loader.dispose()
    return _parse_nodes(text)


def _from_events(loader: Any) -> Any:
    from yaml.events import (
        AliasEvent,
        DocumentEndEvent,
        MappingEndEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceEndEvent,
        SequenceStartEvent,
        StreamEndEvent,
    )
    from yaml.nodes import ScalarNode

    if loader.yaml_path_resolvers:  # tags that depend on the node's path: the composer's business
        raise _Unusual
    get_event, resolve = loader.get_event, loader.resolve
    plain_tags: dict[str, str] = {}  # plain scalar -> its resolved tag (resolved once per distinct value)
    get_event()  # StreamStartEvent
    if isinstance(get_event(), StreamEndEvent):  # else DocumentStartEvent
        return None
    anchors: dict[str, Any] = {}
    scalars: dict[tuple[str, str], Any] = {}
    open_containers: list[list[Any]] = []  # [container, is a mapping, key waiting for its value or _NO_KEY]
    while True:
        event = get_event()
        kind = type(event)
        if kind is ScalarEvent:
            tag = event.tag
            if tag is None and event.implicit[0]:
                tag = plain_tags.get(event.value)
                if tag is None:
                    tag = plain_tags[event.value] = resolve(ScalarNode, event.value, event.implicit)
            elif tag is None or tag == "!":
                tag = resolve(ScalarNode, event.value, event.implicit)
            if tag == _STR_TAG:
                value = event.value
            elif tag == _MERGE_TAG or tag == _VALUE_TAG:
                raise _Unusual
            else:
                try:
                    value = scalars[tag, event.value]
                except KeyError:
                    node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
                    value = scalars[tag, event.value] = loader.construct_object(node, deep=True)
            if event.anchor is not None:
                if event.anchor in anchors:
                    raise _Unusual
                anchors[event.anchor] = value
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            mapping = kind is MappingStartEvent
            if event.tag not in (None, "!", _MAP_TAG if mapping else _SEQ_TAG):
                raise _Unusual
            container: Any = {} if mapping else []
            if event.anchor is not None:
                if event.anchor in anchors:
                    raise _Unusual
                anchors[event.anchor] = container
            open_containers.append([container, mapping, _NO_KEY])
            continue
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            value = open_containers.pop()[0]
        elif kind is AliasEvent:
            value = anchors.get(event.anchor, _NO_KEY)
            if value is _NO_KEY or any(value is entry[0] for entry in open_containers):
                raise _Unusual  # undefined, or recursive
        else:
            raise _Unusual
        if not open_containers:
            break
        top = open_containers[-1]
        if not top[1]:
            top[0].append(value)
        elif top[2] is _NO_KEY:
            if isinstance(value, list | dict):
                raise _Unusual
            top[2] = value
        else:
            if top[2] in top[0]:
                raise _Unusual
            top[0][top[2]] = value
            top[2] = _NO_KEY
    if not isinstance(get_event(), DocumentEndEvent) or not isinstance(get_event(), StreamEndEvent):
        raise _Unusual
    return value


def _parse_nodes(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        return None if node is None else _build(loader, node, {})
    finally:
        loader.dispose()


def _build(loader: Any, node: Any, built: dict[int, Any]) -> Any:
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    if id(node) in built:  # an alias: the same object, as PyYAML gives
        return built[id(node)]
    if isinstance(node, ScalarNode):
        return node.value if node.tag == _STR_TAG else loader.construct_object(node, deep=True)
    if isinstance(node, SequenceNode) and node.tag == _SEQ_TAG:
        items: list[Any] = []
        built[id(node)] = items
        items.extend(_build(loader, child, built) for child in node.value)
        return items
    if (isinstance(node, MappingNode) and node.tag == _MAP_TAG
            and all(isinstance(key, ScalarNode) and key.tag != _MERGE_TAG for key, _ in node.value)):
        mapping: dict[Any, Any] = {}
        built[id(node)] = mapping
        first_seen: dict[Any, Any] = {}
        for key_node, value in node.value:
            key = _build(loader, key_node, built)
            if key in first_seen:
                raise _duplicate_key(key, first_seen[key], key_node)
            first_seen[key] = key_node
            mapping[key] = _build(loader, value, built)
        return mapping
    if isinstance(node, MappingNode):
        _check_unique_keys(node)
    return loader.construct_object(node, deep=True)


def _check_unique_keys(node: Any) -> None:
    """Duplicate scalar keys of a mapping handed to PyYAML's constructor (merge keys ``<<`` may repeat)."""
    from yaml.nodes import ScalarNode

    first_seen: dict[tuple[str, str], Any] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        identity = (key_node.tag, key_node.value)
        if identity in first_seen:
            raise _duplicate_key(key_node.value, first_seen[identity], key_node)
        first_seen[identity] = key_node


def _duplicate_key(key: Any, first: Any, again: Any) -> Exception:
    from yaml.constructor import ConstructorError

    return ConstructorError(None, None, f"duplicate key {key!r} (first given at line {first.start_mark.line + 1})",
                            again.start_mark)
