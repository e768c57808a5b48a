"""Small datasets for verbalizer tests, written here."""

from annotate.verbalizer.models import ClassificationDataset, ClassificationItem


def fill(name: str, labels: list[bool], *, text_b: str = "") -> ClassificationDataset:
    """Give the seeded (or a new sentiment) dataset `name` one item per label."""
    dataset, _ = ClassificationDataset.objects.get_or_create(
        name=name,
        defaults={"family": "sentiment", "positive_name": "positive", "negative_name": "negative"},
    )
    ClassificationItem.objects.bulk_create(
        ClassificationItem(
            dataset=dataset, position=i, text=f"{name} text {i}", text_b=text_b, is_positive=label
        )
        for i, label in enumerate(labels, start=1)
    )
    return dataset
