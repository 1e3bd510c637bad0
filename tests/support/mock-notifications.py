#!/usr/bin/env python3
"""A small org.freedesktop.Notifications service on the session bus, for the window tests.

It records each notification it is sent (one JSON line per Notify call in the file given as
its argument) and, like a person clicking it, invokes its `default` action 300 ms later when
the notification offers one. It prints "ready" once it owns the name.
"""

import json
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

IFACE = "org.freedesktop.Notifications"


class Notifications(dbus.service.Object):
    def __init__(self, bus, log):
        super().__init__(bus, "/org/freedesktop/Notifications")
        self.log = log
        self.next_id = 0

    @dbus.service.method(IFACE, in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["actions", "body"]

    @dbus.service.method(IFACE, in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("berth-test-notifications", "berth", "1", "1.2")

    @dbus.service.method(IFACE, in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
        self.next_id += 1
        nid = self.next_id
        with open(self.log, "a") as f:
            f.write(json.dumps({"id": nid, "app": str(app), "summary": str(summary),
                                "body": str(body), "actions": [str(a) for a in actions]}) + "\n")
        if "default" in [str(a) for a in actions[::2]]:
            GLib.timeout_add(300, lambda: (self.ActionInvoked(nid, "default"), False)[1])
        return nid

    @dbus.service.method(IFACE, in_signature="u", out_signature="")
    def CloseNotification(self, nid):
        self.NotificationClosed(nid, 3)

    @dbus.service.signal(IFACE, signature="us")
    def ActionInvoked(self, nid, key):
        pass

    @dbus.service.signal(IFACE, signature="uu")
    def NotificationClosed(self, nid, reason):
        pass


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    name = dbus.service.BusName(IFACE, bus, do_not_queue=True)
    service = Notifications(bus, sys.argv[1])
    print("ready", flush=True)
    GLib.MainLoop().run()
    del name, service


if __name__ == "__main__":
    main()
