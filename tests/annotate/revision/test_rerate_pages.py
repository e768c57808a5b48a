"""The researchers' re-rating page and API: who may send, what is sent, errors beside fields."""

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from annotate.revision.models import Rerating, RevisionSession, Turn
from annotate.roles import ANNOTATOR
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def owners(study):
    """ana did the first question's session (2 rated turns), ben the second's (2 rated turns);
    cara did none. All three are annotators; rex is a researcher, not an annotator."""
    users = [
        UserFactory(username=name, roles=[ANNOTATOR], kind="expert")
        for name in ("ana", "ben", "cara")
    ]
    UserFactory(username="rex")
    now = timezone.now()
    for user, question, system in zip(
        users, study.questions.all(), study.systems.all(), strict=False
    ):
        session = RevisionSession.objects.create(
            study=study, question=question, system=system, annotator=user,
            status="finished", initial_answer="a0", created_at=now,
        )  # fmt: skip
        for position in (1, 2):
            Turn.objects.create(
                session=session, position=position, instruction="i", answer="a",
                rating="good", comment="c",
            )  # fmt: skip
    return users


def url(study):
    return reverse("revision:rerate", args=[study.pk])


def pk_of(*users):
    return [u.pk for u in users]


def test_annotators_get_the_403_page(client, study, owners):
    client.force_login(owners[0])
    assert client.get(url(study)).status_code == 403
    post = client.post(url(study), {"size": 1, "annotators": pk_of(owners[1]), "seed": 0})
    assert post.status_code == 403 and not Rerating.objects.exists()


def test_researcher_sends_a_sample_never_to_the_sessions_own_annotator(
    client, researcher, study, owners
):
    client.force_login(researcher)
    page = client.get(url(study))
    assert page.status_code == 200
    # Only annotator accounts are offered, with their sessions in this study.
    assert "ana (1 session in this study; alone may re-rate 2)" in page.text
    assert "cara (0 sessions in this study; alone may re-rate 4)" in page.text
    assert "rex" not in page.text
    assert page.context["summary"].left == 4 and page.context["prerequisites"] == []

    sent = client.post(url(study), {"size": 4, "annotators": pk_of(*owners[:2]), "seed": 7})
    assert sent.status_code == 302 and sent["Location"] == url(study)
    reratings = list(Rerating.objects.select_related("turn__session"))
    assert len(reratings) == 4
    # ana's turns went to ben and ben's to ana: the only other annotator each time.
    assert all(r.annotator_id != r.turn.session.annotator_id for r in reratings)
    after = client.get(url(study))
    assert "Sent 4 turns for re-rating." in after.text
    assert after.context["summary"].left == 0 and after.context["summary"].sent == 4
    assert after.context["prerequisites"][0].url == reverse("revision:upload")


def test_the_page_draws_the_same_sample_as_the_command(client, researcher, study, owners):
    client.force_login(researcher)
    client.post(url(study), {"size": 3, "annotators": pk_of(owners[2], owners[0]), "seed": 5})
    from_page = sorted(Rerating.objects.values_list("turn_id", "annotator__username"))
    Rerating.objects.all().delete()
    call_command(
        "revision_rerate", "--study", "live", "--size", "3", "--annotator", "cara",
        "--annotator", "ana", "--seed", "5",
    )  # fmt: skip
    assert sorted(Rerating.objects.values_list("turn_id", "annotator__username")) == from_page


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"size": 5, "seed": 0}, "size", "only 4 finished turns are left to re-rate, not 5"),
        ({"size": 0, "seed": 0}, "size", "greater than or equal to 1"),
        ({"size": 1, "seed": -1}, "seed", "greater than or equal to 0"),
        (
            {"size": 2, "seed": 0, "only": "ana"},
            "size",
            "only 2 of the 4 finished turns left may go to ana, the only annotator chosen (the "
            "other 2 are of ana&#x27;s own sessions), not 3: ask for 2 or fewer, or choose "
            "another annotator too",
        ),
        ({"size": 1, "seed": 0, "none": True}, "annotators", "This field is required"),
        ({"size": 1, "seed": 0, "rex": True}, "annotators", "Select a valid choice"),
    ],
)
def test_bad_input_is_shown_beside_its_field_and_nothing_is_sent(
    client, researcher, study, owners, form, field, message
):
    ana = owners[0]
    annotators = pk_of(*owners[:2])
    if form.pop("only", None):  # four turns, two of them ana's own, and only ana to send to
        annotators = [ana.pk]
        form["size"] = 3
    if form.pop("none", None):
        annotators = []
    if form.pop("rex", None):
        annotators = [UserFactory(username="not-annotator").pk]
    client.force_login(researcher)
    page = client.post(url(study), {**form, "annotators": annotators})
    assert page.status_code == 400
    assert message in str(page.context["form"].errors[field])
    assert page.text.count("has-error") == 1  # beside that one field
    assert not Rerating.objects.exists()


def test_prerequisites_name_what_is_missing_with_a_link(client, researcher, admin_user, study):
    client.force_login(researcher)
    page = client.get(url(study))
    problems = [p.problem for p in page.context["prerequisites"]]
    assert problems == [
        "No rated turn of a finished session is left to re-rate.",
        "There is no annotator account.",
    ]
    assert 'id="prerequisites"' in page.text and "disabled" in page.text
    assert page.context["prerequisites"][1].url == ""  # a researcher asks an admin
    client.force_login(admin_user)
    admin_page = client.get(url(study))
    assert admin_page.context["prerequisites"][1].url == reverse("admin:auth_user_add")


def test_api_sends_a_sample_and_refuses_bad_input(
    client, researcher, annotator_user, study, owners
):
    api = reverse("api-revision-reratings", args=[study.pk])
    client.force_login(annotator_user)
    assert (
        client.post(api, {"size": 1, "annotators": ["ana"]}, "application/json").status_code == 404
    )
    client.force_login(researcher)
    unknown = client.post(api, {"size": 1, "annotators": ["ana", "rex"]}, "application/json")
    assert unknown.status_code == 400 and "rex" in unknown.json()["annotators"][0]
    too_many = client.post(api, {"size": 9, "annotators": ["ana", "ben"]}, "application/json")
    assert too_many.status_code == 400 and "only 4" in too_many.json()["size"][0]
    sent = client.post(
        api, {"size": 2, "annotators": ["ana", "ben"], "seed": 1}, "application/json"
    )
    assert sent.status_code == 201 and sent.json()["sent"] == 2
    for item in sent.json()["reratings"]:
        turn = Turn.objects.select_related("session__annotator").get(pk=item["turn"])
        assert item["annotator"] != turn.session.annotator.username
    assert Rerating.objects.count() == 2


def test_one_annotator_alone_gets_a_sample_of_the_turns_they_may_re_rate(
    client, researcher, study, owners
):
    """With ana alone chosen, seed 0 drew one of her own two turns and the whole send was
    refused, though ben's two were hers to re-rate: the sample is drawn from those two alone,
    the page says how many the chosen annotators may take, and asking for more than that is
    refused naming both counts."""
    ana, ben, _ = owners
    client.force_login(researcher)
    refused = client.post(url(study), {"size": 3, "annotators": [ana.pk], "seed": 0})
    assert refused.status_code == 400
    eligible = re.search(r'id="rerate-eligible">(\d+)<', refused.text)
    assert eligible and eligible.group(1) == "2"
    assert '(<span id="rerate-chosen">ana</span>)' in refused.text
    assert "only 2 of the 4 finished turns left may go to ana" in refused.text
    assert not Rerating.objects.exists()

    for seed in range(5):
        Rerating.objects.all().delete()
        sent = client.post(url(study), {"size": 2, "annotators": [ana.pk], "seed": seed})
        assert sent.status_code == 302, (seed, sent.context and sent.context["form"].errors)
        owners_of_sent = Rerating.objects.values_list(
            "annotator__username", "turn__session__annotator__username"
        )
        assert sorted(owners_of_sent) == [("ana", "ben"), ("ana", "ben")]


def test_api_sends_one_annotator_the_turns_they_may_re_rate(client, researcher, study, owners):
    api = reverse("api-revision-reratings", args=[study.pk])
    client.force_login(researcher)
    too_many = client.post(api, {"size": 3, "annotators": ["ana"]}, "application/json")
    assert too_many.status_code == 400
    assert too_many.json()["size"][0].startswith(
        "only 2 of the 4 finished turns left may go to ana, the only annotator chosen (the "
        "other 2 are of ana's own sessions), not 3"
    )
    sent = client.post(api, {"size": 2, "annotators": ["ana"], "seed": 0}, "application/json")
    assert sent.status_code == 201 and sent.json()["sent"] == 2
    for item in sent.json()["reratings"]:
        turn = Turn.objects.select_related("session__annotator").get(pk=item["turn"])
        assert (item["annotator"], turn.session.annotator.username) == ("ana", "ben")


def _shown_sent_before(page) -> int:
    """The hidden count the page's form sends back, as a browser would."""
    value = re.search(r'name="sent_before" value="(\d+)"', page.text)
    assert value, "the form carries the count of turns sent when it was shown"
    return int(value.group(1))


def test_the_same_form_sent_twice_sends_one_sample_and_says_what_went(
    client, researcher, study, owners
):
    """A double click or a stale tab posted the form again and sent a second sample."""
    client.force_login(researcher)
    form = {"size": 2, "annotators": pk_of(*owners[:2]), "seed": 3}
    form["sent_before"] = _shown_sent_before(client.get(url(study)))
    assert form["sent_before"] == 0
    assert client.post(url(study), form).status_code == 302
    first = set(Rerating.objects.values_list("pk", flat=True))
    assert len(first) == 2

    again = client.post(url(study), form, follow=True)
    assert set(Rerating.objects.values_list("pk", flat=True)) == first  # nothing more sent
    names = sorted(Rerating.objects.values_list("annotator__username", flat=True))
    to = ", ".join(f"{names.count(n)} to {n}" for n in sorted(set(names)))
    assert (
        f"This sample was sent already: 2 turns went for re-rating since the study had 0 sent ({to};"
        in again.text
    )
    assert "2 in all. Nothing more was sent; to send another sample, send the form again." in (
        again.text
    )

    # Asked again on the page as it is now: a deliberate second sample is sent.
    form["sent_before"] = _shown_sent_before(again)
    assert form["sent_before"] == 2
    assert client.post(url(study), form).status_code == 302
    assert Rerating.objects.count() == 4


def test_api_retry_with_sent_before_sends_no_second_sample(client, researcher, study, owners):
    api = reverse("api-revision-reratings", args=[study.pk])
    client.force_login(researcher)
    body = {"size": 1, "annotators": ["ana", "ben"], "seed": 2, "sent_before": 0}
    sent = client.post(api, body, "application/json")
    assert sent.status_code == 201 and sent.json()["study_sent"] == 1
    retry = client.post(api, body, "application/json")
    assert retry.status_code == 409 and Rerating.objects.count() == 1
    went = Rerating.objects.get().annotator.username
    assert (
        f"1 turn went for re-rating since the study had 0 sent (1 to {went};"
        in (retry.json()["detail"])
    )
    body["sent_before"] = sent.json()["study_sent"]
    assert client.post(api, body, "application/json").status_code == 201
    assert Rerating.objects.count() == 2


def rerate_command(*extra: str) -> str:
    out = StringIO()
    call_command(
        "revision_rerate", "--study", "live", "--size", "1", "--annotator", "ana",
        "--annotator", "ben", "--seed", "4", *extra, stdout=out,
    )  # fmt: skip
    return out.getvalue()


def test_the_command_run_again_sends_no_second_sample_and_says_what_went(study, owners):
    """The page and the API refuse a form or request sent twice; the command sent a second
    sample every time it was run again (a shell's history, a retried script)."""
    printed = rerate_command()
    first = Rerating.objects.get()
    with pytest.raises(CommandError) as refused:
        rerate_command()
    assert Rerating.objects.get() == first  # nothing more sent
    message = str(refused.value)
    went = first.annotator.username
    counts = {"ana": 0, "ben": 0, went: 1}
    assert (
        f"Sent 1 turn for re-rating (ana {counts['ana']}, ben {counts['ben']}); the study has 1 "
        "sent (another sample: --sent-before 1)"
    ) in printed
    assert (
        f"--sent-before 0: 1 turn went for re-rating since the study had 0 sent (1 to {went}; at "
        in message
    )
    assert "Nothing was sent. To send one more sample on top of these, run again with " in message
    assert "--sent-before 1." in message

    # Deliberately, on top of the first: sent.
    assert "the study has 2 sent" in rerate_command("--sent-before", "1")
    assert Rerating.objects.count() == 2


def test_the_command_refuses_a_negative_sent_before(study, owners):
    with pytest.raises(CommandError, match="--sent-before must be 0 or more, not -1"):
        rerate_command("--sent-before", "-1")
    assert not Rerating.objects.exists()


def test_the_command_sends_only_to_active_annotators_as_the_page_does(study, owners):
    """The page and the API offer only annotator accounts; the command took any username, and a
    researcher's turns then waited on a to-do list nobody opens."""
    with pytest.raises(CommandError, match="no active annotator account named rex"):
        call_command(
            "revision_rerate", "--study", "live", "--size", "1", "--annotator", "ana",
            "--annotator", "rex", stdout=StringIO(),
        )  # fmt: skip
    with pytest.raises(CommandError, match="no active annotator account named nobody"):
        call_command(
            "revision_rerate", "--study", "live", "--size", "1", "--annotator", "nobody",
            stdout=StringIO(),
        )  # fmt: skip
    assert not Rerating.objects.exists()


def test_the_command_names_an_annotator_who_got_none_of_the_sample(study, owners):
    """Only ana's turns are left, so all go to cara: the run says ana got none (it printed
    "Sent 2 turns" alone, as if both named annotators shared them)."""
    RevisionSession.objects.filter(annotator__username="ben").delete()
    out = StringIO()
    call_command(
        "revision_rerate", "--study", "live", "--size", "2", "--annotator", "ana",
        "--annotator", "cara", stdout=out,
    )  # fmt: skip
    assert "Sent 2 turns for re-rating (ana 0, cara 2); the study has 2 sent" in out.getvalue()
    assert set(Rerating.objects.values_list("annotator__username", flat=True)) == {"cara"}
