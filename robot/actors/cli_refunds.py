"""The refund tool of cli_approvals.yaml: it records each refund it makes beside itself."""

from pathlib import Path

REFUNDS = Path(__file__).with_name("refunds.log")


def refund(order: str, amount: float) -> str:
    """Refund AMOUNT on ORDER."""
    with REFUNDS.open("a", encoding="utf-8") as log:
        log.write(f"{order} {amount}\n")
    return f"refunded {amount} on {order}"
