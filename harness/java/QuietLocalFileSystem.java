package cepkit.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (with its checksum files), except that it sets a file's permissions
 * through java.nio instead of running `chmod` in a child process. Without Hadoop's native library
 * (PySpark ships none) every file Hadoop creates costs a process spawn from the engine's JVM;
 * Spark's streaming checkpoint creates several per micro-batch (harness/local_fs.py).
 */
public class QuietLocalFileSystem extends LocalFileSystem {
  public QuietLocalFileSystem() {
    super(new Raw());
  }

  /** The raw file system underneath, with permissions set in-process. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
      add(set, permission.getUserAction(), PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
          PosixFilePermission.OWNER_EXECUTE);
      add(set, permission.getGroupAction(), PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE,
          PosixFilePermission.GROUP_EXECUTE);
      add(set, permission.getOtherAction(), PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE,
          PosixFilePermission.OTHERS_EXECUTE);
      Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
    }

    private static void add(Set<PosixFilePermission> set, FsAction action, PosixFilePermission read,
                            PosixFilePermission write, PosixFilePermission execute) {
      if (action.implies(FsAction.READ)) {
        set.add(read);
      }
      if (action.implies(FsAction.WRITE)) {
        set.add(write);
      }
      if (action.implies(FsAction.EXECUTE)) {
        set.add(execute);
      }
    }
  }
}
