import pytest
from django.core.management import CommandError, call_command

from annotate.verbalizer.models import EvaluationSet, Mapping, Prompt
from annotate.verbalizer.services.sets import SetError, evaluation_set_create, mappings_select
from annotate.verbalizer.services.templates import prompt_render
from tests.annotate.verbalizer.helpers import fill

pytestmark = pytest.mark.django_db


def test_table1_mappings_are_seeded_in_three_groups():
    names = {g: list(Mapping.objects.filter(group=g).values_list("name", flat=True)) for g in
             ("natural", "neutral", "unnatural")}  # fmt: skip
    assert names == {
        "natural": ["golden", "1|0", "yes|no"],
        "neutral": ["foo|bar", "bar|foo", "sfo|lax", "lax|sfo", "lake|river", "river|lake"],
        "unnatural": ["flipped-golden", "0|1", "no|yes"],
    }


def test_words_per_mapping_on_rte():
    from annotate.verbalizer.models import ClassificationDataset

    rte = ClassificationDataset.objects.get(name="RTE")
    words = {m.name: m.words_for(rte) for m in Mapping.objects.all()}
    assert words["golden"] == ("entailment", "not entailment")
    assert words["flipped-golden"] == ("not entailment", "entailment")
    assert words["0|1"] == ("0", "1")
    assert words["river|lake"] == ("river", "lake")


def test_set_uses_the_same_seeded_items_under_every_mapping_and_mode():
    fill("SST-2", [True, False] * 10)
    fill("FP", [True] * 5 + [False] * 5)
    summary = evaluation_set_create(
        name="s1", datasets=["SST-2", "FP"], items=4, seed=7, modes=["direct", "cot"]
    )
    assert summary.prompts == 2 * 4 * 12 * 2
    by_mapping = {}
    for p in Prompt.objects.filter(evaluation_set=summary.evaluation_set):
        by_mapping.setdefault((p.mapping.name, p.mode), set()).add(p.item_id)
    assert len({frozenset(items) for items in by_mapping.values()}) == 1
    again = evaluation_set_create(name="s2", datasets=["SST-2", "FP"], items=4, seed=7)
    items_again = set(again.evaluation_set.prompts.values_list("item_id", flat=True))
    assert items_again == next(iter(by_mapping.values()))
    other = evaluation_set_create(name="s3", datasets=["SST-2", "FP"], items=4, seed=8)
    assert set(other.evaluation_set.prompts.values_list("item_id", flat=True)) != items_again


def test_expected_word_follows_the_mapping_and_the_template_version_is_recorded():
    fill("SST-2", [True, False])
    call_command(
        "verbalizer_set", "s", "--dataset", "SST-2", "--items", "2", "--seed", "1",
        "--mappings", "unnatural", "--modes", "cot",
    )  # fmt: skip
    prompt = Prompt.objects.get(item__is_positive=True, mapping__name="flipped-golden")
    assert (prompt.positive_word, prompt.negative_word, prompt.expected_word) == (
        "negative", "positive", "negative",
    )  # fmt: skip
    assert prompt.template_version == "v1"
    assert prompt.text.startswith('Answer "negative" if the sentiment of the text is "positive"')
    assert prompt.text.endswith("Let's think step by step.")
    assert "SST-2 text 1" in prompt.text
    assert Prompt.objects.count() == 2 * 3


def test_pair_template_shows_both_texts():
    dataset = fill("RTE", [True], text_b="the {hypothesis}")
    text = prompt_render(
        item=dataset.items.get(), positive_word="foo", negative_word="bar", mode="direct"
    )
    assert "Premise: RTE text 1\nHypothesis: the {hypothesis}\nAnswer:" in text
    assert 'Reply with "foo" or "bar" only.' in text


def test_mapping_selection_by_names_and_errors():
    assert [m.name for m in mappings_select("1|0,no|yes")] == ["1|0", "no|yes"]
    with pytest.raises(SetError, match="unknown mapping"):
        mappings_select("1|0,up|down")


def test_bad_set_arguments_write_nothing():
    fill("SST-2", [True])
    with pytest.raises(CommandError, match="no items imported yet"):
        call_command("verbalizer_set", "s", "--dataset", "SST-2", "--dataset", "QQP", "--seed", "1")
    with pytest.raises(CommandError, match="--modes"):
        call_command("verbalizer_set", "s", "--dataset", "SST-2", "--seed", "1", "--modes", "x")
    assert not EvaluationSet.objects.exists()


def test_emptied_mapping_table_is_filled_again_on_first_use():
    Mapping.objects.all().delete()
    fill("SST-2", [True])
    summary = evaluation_set_create(name="s", datasets=["SST-2"], items=1, seed=1)
    assert summary.prompts == 12
    assert Mapping.objects.get(name="lake|river").group == "neutral"


def test_the_command_counts_one_of_each_in_the_singular():
    """`verbalizer_set` printed "1 datasets x 1 mappings x 1 modes x up to 1 items"."""
    import io

    fill("SST-2", [True, False])
    out = io.StringIO()
    call_command(
        "verbalizer_set", "one", "--dataset", "SST-2", "--items", "1", "--seed", "1",
        "--mappings", "golden", stdout=out,
    )  # fmt: skip
    assert "Set one: 1 prompt (1 dataset x 1 mapping x 1 mode x up to 1 item, seed 1" in (
        out.getvalue()
    )
    fill("RTE", [True, False])
    call_command(
        "verbalizer_set", "two", "--dataset", "SST-2", "--dataset", "RTE", "--items", "2",
        "--seed", "1", "--mappings", "golden,flipped-golden", "--modes", "direct,cot",
        stdout=out,
    )  # fmt: skip
    assert "Set two: 16 prompts (2 datasets x 2 mappings x 2 modes x up to 2 items" in (
        out.getvalue()
    )
