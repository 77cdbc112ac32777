# Test-only client: reads TensorBoard event files with TensorBoard's own reader (the tensorboard
# package's EventAccumulator, what `tensorboard --logdir` uses for scalars), so that the files
# wavetrain's TensorBoardWriter (trainer/tensorboard.h) writes are checked by the real program.
#
# usage: tensorboard_scalars.py EVENT_FILE_OR_DIR
#   EVENT_FILE_OR_DIR: one events.out.tfevents.* file, or a directory whose events.out.tfevents.*
#   files are read (in name order, not its subdirectories, as EventAccumulator does).
#
# Output, tab-separated, one line each:
#   file_version<TAB>V           first, when an event carried a file_version; V is the version number
#                                TensorBoard parsed from it ("brain.Event:2" gives 2)
#   TAG<TAB>STEP<TAB>WALL_TIME<TAB>VALUE
#                                every scalar, sorted by tag and then step (points with the same tag
#                                and step keep their order in the file); WALL_TIME as %.6f, VALUE as
#                                %.9g (enough digits to give back the stored float32 exactly)
# Nothing is dropped: size_guidance keeps every scalar (0 = no limit), and purge_orphaned_data is off,
# so steps that go backwards are printed as they are.
#
# Exits with status 1 and a message on stderr (stdout empty) when the path is missing or is not an
# event file or a directory, when no event can be read, or when TensorBoard's record reader met a
# damaged or truncated record (it logs that and stops reading the file; that is caught here).
import logging
import os
import sys


def fail(message):
    print("tensorboard_scalars.py: " + message, file=sys.stderr)
    sys.exit(1)


class DamagedRecords(logging.Handler):
    # TensorBoard's event file loader reports a CRC mismatch or a cut-off record only as a debug log
    # line ("Truncated record in FILE (...)") and then stops reading that file.
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.messages = []

    def emit(self, record):
        text = record.getMessage()
        if text.startswith("Truncated record in"):
            self.messages.append(text)


def main():
    if len(sys.argv) != 2:
        fail("usage: tensorboard_scalars.py EVENT_FILE_OR_DIR")
    path = sys.argv[1]
    if not os.path.exists(path):
        fail("%s does not exist" % path)
    if os.path.isfile(path) and "tfevents" not in os.path.basename(path):
        fail("%s is not an event file (its name has no 'tfevents')" % path)
    if not os.path.isfile(path) and not os.path.isdir(path):
        fail("%s is neither a file nor a directory" % path)

    try:
        from tensorboard.backend.event_processing import event_accumulator as ea
    except ImportError as e:
        fail("needs tensorboard (scripts/pip-test-clients.txt): %s" % e)

    damaged = DamagedRecords()
    tb_logger = logging.getLogger("tensorboard")
    tb_logger.addHandler(damaged)
    tb_logger.setLevel(logging.DEBUG)
    tb_logger.propagate = False  # keep its debug chatter off stderr

    accumulator = ea.EventAccumulator(path, size_guidance={ea.SCALARS: 0}, purge_orphaned_data=False)
    try:
        accumulator.Reload()
    except Exception as e:
        fail("TensorBoard cannot read %s: %s: %s" % (path, type(e).__name__, e))
    if damaged.messages:
        fail("TensorBoard's reader stopped at a damaged record: " + "; ".join(damaged.messages))
    try:
        accumulator.FirstEventTimestamp()
    except ValueError:
        fail("no events in %s" % path)

    lines = []
    if accumulator.file_version is not None:
        lines.append("file_version\t%g" % accumulator.file_version)
    points = []
    for tag in accumulator.Tags()[ea.SCALARS]:
        for index, event in enumerate(accumulator.Scalars(tag)):
            points.append((tag, event.step, index, event.wall_time, event.value))
    points.sort(key=lambda p: (p[0], p[1], p[2]))
    for tag, step, _, wall_time, value in points:
        lines.append("%s\t%d\t%.6f\t%.9g" % (tag, step, wall_time, value))
    sys.stdout.write("".join(line + "\n" for line in lines))


main()
