"""Drive the store server's `adjust_stock` tool with the official Python MCP SDK.

A cross-implementation check: the `mcp` package (2.3.0, PyPI) talks to the
store server over streamable HTTP in either protocol era and answers the
server's approval question (form-mode elicitation with a boolean `approve`).

    python store_client.py --url http://127.0.0.1:PORT/mcp --era legacy|2026-07-28 \
        --answer approve|decline|none --sku SKU --delta N --reason TEXT [--header NAME:VALUE ...]

`--era legacy` uses the initialize handshake; `--era 2026-07-28` pins that
protocol version (no handshake), where the server asks for approval inside an
InputRequiredResult and `Client.call_tool` runs the round trip itself, calling
the same elicitation callback. `--answer none` gives the client no elicitation
callback, so it declares no elicitation capability: a headless agent.

Prints one JSON line, {"isError": bool, "text": str, "elicitations": int,
"wire": str} (`wire`: the whole result as JSON, to look for leaks in),
and exits 0 when the tool call completed (even with isError). On a protocol
or transport failure it prints a message on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import httpx2  # the SDK's own HTTP client library, installed with `mcp`
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, TextContent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="streamable HTTP endpoint, e.g. http://127.0.0.1:8080/mcp")
    parser.add_argument("--era", required=True, choices=["legacy", "2026-07-28"])
    parser.add_argument("--answer", required=True, choices=["approve", "decline", "none"])
    parser.add_argument("--sku", required=True)
    parser.add_argument("--delta", required=True, type=int)
    parser.add_argument("--reason", required=True)
    parser.add_argument(
        "--header", action="append", default=[], metavar="NAME:VALUE", help="extra HTTP header on every request"
    )
    args = parser.parse_args(argv)
    args.headers = {}
    for item in args.header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            parser.error(f"--header must be NAME:VALUE, got {item!r}")
        args.headers[name.strip()] = value.strip()
    return args


async def run(args: argparse.Namespace) -> dict[str, object]:
    answered = 0

    async def on_elicitation(context, params) -> ElicitResult:
        nonlocal answered
        answered += 1
        if args.answer == "approve":
            return ElicitResult(action="accept", content={"approve": True})
        return ElicitResult(action="decline")

    # A Client given a bare URL builds its own httpx2 client; pass one to add headers.
    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults (create_mcp_http_client)
    async with httpx2.AsyncClient(headers=args.headers, timeout=timeout) as http:
        transport = streamable_http_client(args.url, http_client=http)
        callback = None if args.answer == "none" else on_elicitation
        async with Client(transport, mode=args.era, elicitation_callback=callback) as client:
            result = await client.call_tool(
                "adjust_stock", {"sku": args.sku, "delta": args.delta, "reason": args.reason}
            )

    text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
    return {
        "isError": bool(result.is_error),
        "text": text,
        "elicitations": answered,
        "wire": result.model_dump_json(by_alias=True),
    }


def describe(error: BaseException) -> str:
    """Flatten the exception groups anyio wraps transport failures in."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        outcome = asyncio.run(run(args))
    except Exception as error:  # protocol or transport failure
        print(f"store_client: {describe(error)}", file=sys.stderr)
        return 1
    print(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
