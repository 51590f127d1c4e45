"""Typed readers of untrusted JSON values, each naming the field at fault, as the shipped JSON Schemas define them.

The schemas in ``schemas/`` are the one definition of a valid document; the decoders of ``TaskManifest``,
``SuccessData`` and ``IOStatisticsSnapshot`` are written with these readers to accept exactly what the schemas
accept (``tests/test_schemas.py`` checks both against many broken and mutated documents). Hand-written rather
than a schema validator at load time: a job commit decodes millions of file entries, and a generic validator
walking the schema for each of them would cost more than the decoding itself.

JSON Schema's ``integer`` is a number with no fractional part, so ``2.0`` is an integer (and ``true`` is not);
readers follow that. Unknown keys are ignored everywhere, as Hadoop's readers do.
"""

from __future__ import annotations

from typing import Any

_SHOWN = 60


class FieldError(ValueError):
    """One value of a document breaks its schema; the message starts with the field's path (``files[3].z``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field {field}: {problem}")
        self.field = field


def shown(value: Any) -> str:
    """A value for an error message, cut short: a document may hold megabytes in one field."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def child(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def required(raw: dict[str, Any], key: str, parent: str = "", label: str = "") -> Any:
    """The value of a key the schema requires; ``label`` says what a short key means (``s`` is the source)."""
    try:
        return raw[key]
    except KeyError:
        raise FieldError(child(parent, key) + (f" ({label})" if label else ""), "is missing") from None


def json_object(value: Any, field: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise FieldError(field, f"must be an object, got {shown(value)}")
    return value


def json_array(value: Any, field: str) -> list[Any]:
    if type(value) is not list:
        raise FieldError(field, f"must be an array, got {shown(value)}")
    return value


def text(value: Any, field: str, *, min_length: int = 0) -> str:
    if type(value) is not str or len(value) < min_length:
        wanted = "a non-empty string" if min_length else "a string"
        raise FieldError(field, f"must be {wanted}, got {shown(value)}")
    return value


def boolean(value: Any, field: str) -> bool:
    if type(value) is not bool:
        raise FieldError(field, f"must be true or false, got {shown(value)}")
    return value


def integer(value: Any, field: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """A JSON Schema integer within bounds; an integral float such as ``2.0`` counts, a boolean does not."""
    number: int
    if type(value) is int:
        number = value
    elif type(value) is float and value.is_integer():
        number = int(value)
    else:
        raise FieldError(field, f"must be an integer, got {shown(value)}")
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        low = "" if minimum is None else f" >= {minimum}"
        high = "" if maximum is None else f" <= {maximum}"
        raise FieldError(field, f"must be an integer{low}{' and' if low and high else ''}{high}, got {number}")
    return number


def integer_map(value: Any, field: str) -> dict[str, int]:
    """An object of integers (Hadoop's ``Map<String, Long>``)."""
    raw = json_object(value, field)
    result: dict[str, int] = {}
    for key, item in raw.items():
        result[key] = item if type(item) is int else integer(item, f"{field}.{key}")
    return result


def text_map(value: Any, field: str) -> dict[str, str]:
    """An object of strings (Hadoop's ``Map<String, String>``)."""
    raw = json_object(value, field)
    for key, item in raw.items():
        if type(item) is not str:
            raise FieldError(f"{field}.{key}", f"must be a string, got {shown(item)}")
    return dict(raw)


def optional_text(raw: dict[str, Any], key: str) -> str | None:
    """An optional string: absent is ``None``, present must be a string."""
    if key not in raw:
        return None
    return text(raw[key], key)
