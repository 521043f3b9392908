from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskMsg(_message.Message):
    __slots__ = ("name", "origin", "deps", "body")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    DEPS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    name: str
    origin: str
    deps: _containers.RepeatedScalarFieldContainer[str]
    body: bytes
    def __init__(self, name: _Optional[str] = ..., origin: _Optional[str] = ..., deps: _Optional[_Iterable[str]] = ..., body: _Optional[bytes] = ...) -> None: ...

class QueryMsg(_message.Message):
    __slots__ = ("type", "task", "name", "n", "location")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Create: _ClassVar[QueryMsg.Type]
        Steal: _ClassVar[QueryMsg.Type]
        Complete: _ClassVar[QueryMsg.Type]
        Transfer: _ClassVar[QueryMsg.Type]
        Lookup: _ClassVar[QueryMsg.Type]
        NotFound: _ClassVar[QueryMsg.Type]
        OK: _ClassVar[QueryMsg.Type]
        Exit: _ClassVar[QueryMsg.Type]
        Error: _ClassVar[QueryMsg.Type]
    Create: QueryMsg.Type
    Steal: QueryMsg.Type
    Complete: QueryMsg.Type
    Transfer: QueryMsg.Type
    Lookup: QueryMsg.Type
    NotFound: QueryMsg.Type
    OK: QueryMsg.Type
    Exit: QueryMsg.Type
    Error: QueryMsg.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    type: QueryMsg.Type
    task: _containers.RepeatedCompositeFieldContainer[TaskMsg]
    name: str
    n: int
    location: str
    def __init__(self, type: _Optional[_Union[QueryMsg.Type, str]] = ..., task: _Optional[_Iterable[_Union[TaskMsg, _Mapping]]] = ..., name: _Optional[str] = ..., n: _Optional[int] = ..., location: _Optional[str] = ...) -> None: ...
