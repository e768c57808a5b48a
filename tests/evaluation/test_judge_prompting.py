from evaluation.judges import prompting as p

RULES_START = (
    "Based on the provided Input (if any) and Generated Text, answer the ensuing Questions"
)


def test_prompt_file_cites_its_source_and_keeps_table_7_rules():
    text = (p.PROMPTS_DIR / "infobench_v1.txt").read_text()
    assert "Table 7" in text and "MIT" in text and "2401.03601" in text
    rules = p.load_prompt("infobench_v1").sections["rules"]
    assert rules.startswith(RULES_START)
    assert rules.endswith("Consequently, the answer should be 'NO'.")
    assert "\n\n- NO: Opt for 'NO'" in rules


def test_first_turn_with_and_without_input():
    prompt = p.load_prompt()
    with_input = p.first_turn(prompt, input_text="IN {x}", response="OUT", question="Q1?")
    assert (
        with_input
        == f'{prompt.sections["rules"]}\n\nInput:\n"IN {{x}}"\n\nGenerated Text:\n"OUT"\n\nQuestion:\nQ1?\n'
    )
    without = p.first_turn(prompt, input_text="", response="OUT", question="Q1?")
    assert "Input:" not in without.removeprefix(prompt.sections["rules"])
    assert without.endswith('\n\nGenerated Text:\n"OUT"\n\nQuestion:\nQ1?\n')


def test_placeholders_in_the_response_are_not_filled():
    prompt = p.load_prompt()
    turn = p.first_turn(prompt, input_text="", response="{question} {rules}", question="Q?")
    assert '"{question} {rules}"' in turn


def test_all_in_one_numbers_questions():
    turn = p.all_in_one_turn(p.load_prompt(), input_text="", response="R", questions=["A?", "B?"])
    assert "Questions:\n1. A?\n2. B?\n" in turn
