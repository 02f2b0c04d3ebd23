"""Rules on what an agent message says (castdata.label.rules): record ids nothing showed, and a value of the tool
result just read given wrong."""

from __future__ import annotations

import json

from castdata.label.rules import guessed_ids, misread_values


def test_a_message_that_names_a_record_id_nothing_showed_guessed_it():
    seen = 'user: exchange my lamp\ntool: {"order_id": "#W3916020", "item_ids": ["7758198585"]}'
    text = "I can exchange item 7758198585 of order #W3916020 for item 5546244844 (yes/no)?"
    assert guessed_ids(text, seen) == ["5546244844"]
    assert guessed_ids("Your order W3916020 is pending; the refund is $1,234.56 on 2024-05-20.", seen) == []
    assert guessed_ids("I will pay with gift_card_0000000.", seen) == ["gift_card_0000000"]


def test_a_message_that_gives_a_field_of_the_result_just_read_another_number_misread_it():
    result = json.dumps({"payment_history": [{"amount": 161}, {"amount": 209.5}], "price": 49.67})
    assert misread_values("Done: the amount on record is 59.67.", result) == ["59.67"]
    assert misread_values("The price is $49.67 and the amount was 209.50.", result) == []
    assert misread_values("The amount is 370.5 in all.", result) == []  # the field's total
    assert misread_values("The price difference of $167.87 is due.", result) == []  # another quantity
    assert misread_values("Done.", "not json") == []
    # part 5's retail 35: the laptop prices listed after an order lookup came from an earlier product lookup
    listed = "Options: a 13-inch laptop. Price: $2729.32"
    assert misread_values(listed, result) == ["2729.32"]
    assert misread_values(listed, result, earlier=json.dumps({"1657832319": {"price": 2729.32}})) == []
