"""A stdio MCP server (Python SDK) that tries system calls the sandbox
refuses (tests/tests/sandbox_syscalls.rs).

Its one tool, `syscalls`, makes each call with `ctypes` and answers a JSON
object: each call's name and what it got, the errno's name ("EPERM") or
"ok" with the result. A refused call answers "EPERM" from the seccomp
filter; an allowed one answers what the kernel says (often "EBADF" or
"EINVAL" for the harmless arguments used here). Numbers are x86_64's.
"""

import ctypes
import errno
import json
import socket

from mcp.server.fastmcp import FastMCP

mcp = FastMCP("syscalls")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

ADDR_NO_RANDOMIZE = 0x0040000
QUERY = 0xFFFFFFFF


def call(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    if result == -1:
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return f"ok {result}"


def io_uring_setup():
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    return call(425, 1, ctypes.addressof(params))


def open_socket(family):
    try:
        socket.socket(family, socket.SOCK_STREAM if family != socket.AF_ALG else socket.SOCK_SEQPACKET).close()
        return "ok"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))


@mcp.tool()
def syscalls() -> str:
    """Try the system calls the sandbox refuses, and a few it allows."""
    tried = {
        "io_uring_setup": io_uring_setup(),
        "io_uring_enter": call(426, -1, 0, 0, 0, 0, 0),
        "io_uring_register": call(427, -1, 0, 0, 0),
        "personality ADDR_NO_RANDOMIZE": call(135, ADDR_NO_RANDOMIZE),
        "socket AF_VSOCK": open_socket(socket.AF_VSOCK),
        "socket AF_ALG": open_socket(socket.AF_ALG),
        "kcmp": call(312, 1, 1, 0, 0, 0),
        "pidfd_getfd": call(438, -1, 0, 0),
        "uselib": call(134, 0),
        # Allowed: what runtimes make.
        "personality query": call(135, QUERY),
        "socket AF_UNIX": open_socket(socket.AF_UNIX),
        "getpid": call(39),
    }
    return json.dumps(tried)


if __name__ == "__main__":
    mcp.run()
