"""A stand-in Confluence on 127.0.0.1 serving the real REST v2 (Cloud) and v1 (Data Center) wire formats.

No Confluence can run here, so this server answers the requests the connector makes, with the
shapes Atlassian documents:

Cloud, under ``/wiki`` (basic auth ``email:token``):

- ``GET /wiki/api/v2/spaces?keys=A,B`` - ``{"results": [{"id", "key", "name", "type", "status",
  "_links": {"webui"}}], "_links": {"base", "next"?}}``;
- ``GET /wiki/api/v2/spaces/{id}/pages?status=&sort=&limit=&cursor=&body-format=`` - page bulk
  objects (``id``, ``status``, ``title``, ``spaceId``, ``createdAt``, ``version {number, createdAt,
  ...}``, ``body`` only when asked, ``_links {webui, editui, tinyui}``); paged by an opaque
  ``cursor`` in ``_links.next`` *and* the ``Link: <...>; rel="next"`` header (``link_header_only``
  drops the former, as some endpoints do); ``limit`` capped at 250;
- ``GET /wiki/api/v2/pages/{id}?body-format=storage`` - a page single; a trashed page answers
  with ``"status": "trashed"``, a purged one ``404`` with ``{"errors": [...]}``;
- ``GET /wiki/rest/api/content/{id}/restriction/byOperation/read`` - v1 restrictions (users without
  their e-mail, groups with ``name`` and ``id``);
- permissions (issue 11): ``GET /wiki/api/v2/spaces/{id}/permissions`` (assignments ``{id, principal
  {type: user|group|role, id}, operation {key, targetType}}``, cursor-paged), ``GET
  /wiki/api/v2/pages/{id}/ancestors`` (top to bottom), ``GET /wiki/rest/api/group/{groupId}/membersByGroupId``
  (``start``/``limit`` paged, at most :attr:`ConfluenceStandIn.member_page_cap` a page, members with
  their ``email``, ``""`` when hidden), ``GET /wiki/rest/api/group/by-name?name=`` and ``GET
  /wiki/rest/api/user?accountId=`` (``email`` left out when the user hides it).

Data Center, under the context path ``/confluence`` (``Authorization: Bearer <PAT>``):

- ``GET /confluence/rest/api/content/search?cql=&start=&limit=&expand=`` - content objects with
  ``_links {base, context, next?, self}``, where ``next`` is relative to ``base`` (no context
  path); ``limit`` capped at 200 (50 with bodies). The CQL subset: ``type=page``, ``space = "K"``
  / ``space in ("A","B")``, ``lastmodified >= "yyyy/MM/dd HH:mm"`` **read in the site's time
  zone** (``site_tz``), ``ORDER BY lastmodified|created|id [ASC|DESC]``; only current pages;
- ``GET /confluence/rest/api/content/{id}?expand=...`` - one page; trashed or purged: ``404``;
  ``expand=ancestors`` gives the ancestors top to bottom;
- permissions: ``GET /confluence/rest/api/space/{key}/permissions`` (a list of ``{operation
  {operationKey, targetType}, subject {type: user|group|anonymous, ...}}``), ``GET
  /confluence/rest/api/group/{name}/member`` (``start``/``limit`` paged, no e-mails) and ``GET
  /confluence/rest/api/user?username=`` (with ``email``, left out when hidden).

Permissions model: :meth:`ConfluenceStandIn.grant` gives a space's read permission (a space nobody was
granted is readable by the group ``confluence-users``), :meth:`ConfluenceStandIn.add_user` and
:meth:`ConfluenceStandIn.add_group` make people and groups (a group's Cloud id is ``id-<name>``), page
restrictions are ``Page.users``/``Page.groups`` (:meth:`ConfluenceStandIn.restrict` changes them without
a new version, as Confluence does) and ``Page.parent`` places a page under another.

Faults are injected with :meth:`ConfluenceStandIn.fail` (e.g. a ``429`` with ``Retry-After`` on the
second listing page, a ``500`` mid-sync). Every request is logged in :attr:`ConfluenceStandIn.requests`.
"""

from tests.standins.confluence.model import CLOUD_EMAIL, CLOUD_TOKEN, DC_TOKEN, Fault, Page
from tests.standins.confluence.site import ConfluenceStandIn

__all__ = ["CLOUD_EMAIL", "CLOUD_TOKEN", "DC_TOKEN", "ConfluenceStandIn", "Fault", "Page"]
