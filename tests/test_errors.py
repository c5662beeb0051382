"""specviz/errors.py: a pydantic error becomes one line naming the field, the whole file's included."""

import pytest
from pydantic import BaseModel, ValidationError, model_validator

from specviz.errors import refusal


class Point(BaseModel):
    x: int
    y: int = 0


class Ordered(BaseModel):
    low: int
    high: int

    @model_validator(mode="after")
    def ordered(self):
        if self.low > self.high:
            raise ValueError("low is above high")
        return self


def refused(model: type[BaseModel], data: object) -> str:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return refusal(caught.value, model, "the file")


def test_a_field_is_named():
    assert refused(Point, {"x": [1]}).startswith("x must be an integer, got ")
    assert refused(Point, {}) == "the file lacks the fields: x"


@pytest.mark.parametrize("data", [[], 3, "text"])
def test_a_whole_file_of_the_wrong_shape_is_named_as_the_file(data):
    """The error's location is the whole input (an empty loc): it once raised IndexError instead of a line."""
    assert refused(Point, data).startswith("the file must be an object, got ")


def test_a_check_of_the_whole_file_is_said_with_its_reason():
    assert refused(Ordered, {"low": 2, "high": 1}) == "the file: low is above high"
