"""The rules between an actor config's fields, reported in the same pass as every field's own
problem (see `cleveractors.config`), and the frozen base of its models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ModelWrapValidatorHandler, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

__all__ = [
    "CROSS_FIELD",
    "ENV_NAME_PATTERN",
    "Frozen",
    "Problem",
    "entries",
    "is_true",
    "named",
    "validated_with_rules",
]

CROSS_FIELD = "cross_field"  # the error type of a rule between fields
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True, slots=True)
class Problem:
    """A rule between fields broken: reported at the field it is about (pydantic would name the
    enclosing object and echo all of it), with that field's value when it helps."""

    loc: tuple[str | int, ...]
    message: str
    value: object = None
    """Shown as ``(got ...)``; None shows nothing."""


_ModelT = TypeVar("_ModelT", bound=BaseModel)
_LAX_BOOL: TypeAdapter[bool] = TypeAdapter(bool)


def validated_with_rules(
    data: object, handler: ModelWrapValidatorHandler[_ModelT], problems: list[Problem]
) -> _ModelT:
    """Validate `data`, reporting `problems` (rules between its fields, checked on the raw data)
    together with every field's own problem: in an after-validator, a rule would be checked only
    once every field is valid, and a user would fix a config one pass at a time."""
    try:
        model = handler(data)
    except ValidationError as exc:
        errors = [*map(_reraised, exc.errors()), *map(_init_error, problems)]
        raise ValidationError.from_exception_data(exc.title, errors) from None
    if problems:
        errors = [_init_error(problem) for problem in problems]
        raise ValidationError.from_exception_data(type(model).__name__, errors)
    return model


def _reraised(error: ErrorDetails) -> InitErrorDetails:
    """A field's error as it was, its message included (a known type would get its default)."""
    kind = PydanticCustomError(error["type"], error["msg"], error.get("ctx"))
    return {"type": kind, "loc": error["loc"], "input": error["input"]}


def _init_error(problem: Problem) -> InitErrorDetails:
    kind = PydanticCustomError(CROSS_FIELD, problem.message)
    return {"type": kind, "loc": problem.loc, "input": problem.value}


def is_true(value: object) -> bool:
    """Whether a raw value is one pydantic reads as true (`true`, `yes`, 1...)."""
    try:
        return _LAX_BOOL.validate_python(value)
    except ValidationError:
        return False  # its field's own problem


def entries(data: Mapping[str, Any], key: str) -> list[tuple[int, Mapping[str, Any]]]:
    """The mappings of a raw list field, by position; anything else is its field's own problem."""
    value = data.get(key)
    if not isinstance(value, list | tuple):
        return []
    return [(position, entry) for position, entry in enumerate(value) if isinstance(entry, Mapping)]


def named(entries: list[tuple[int, Mapping[str, Any]]]) -> list[tuple[int, str]]:
    names = ((position, entry.get("name")) for position, entry in entries)
    return [(position, name) for position, name in names if isinstance(name, str)]
