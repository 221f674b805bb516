package streamql.fs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's local file system (checksummed, as {@code file:} is by default) whose permission
 * changes are a system call. Without Hadoop's native library (pip's pyspark has none), Hadoop
 * sets the permission of every file and folder it creates by starting a {@code chmod} process;
 * a Spark driver writing checkpoints, state and output starts hundreds a second. Built and
 * used by streamql's runtime/local_fs.py.
 */
public class LocalFileSystemWithoutProcesses extends LocalFileSystem {
  public LocalFileSystemWithoutProcesses() {
    super(new Raw());
  }

  /** RawLocalFileSystem with setPermission through java.nio. */
  public static class Raw extends RawLocalFileSystem {
    /** bit i of a mode, lowest first */
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      int mode = permission.toShort();
      // the native library does it without a process already; java.nio has no sticky bit:
      // Hadoop's own way for it
      if (NativeIO.isAvailable() || (mode & ~0777) != 0) {
        super.setPermission(p, permission);
        return;
      }
      Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
      for (int i = 0; i < BITS.length; i++) {
        if ((mode & (1 << i)) != 0) {
          bits.add(BITS[i]);
        }
      }
      try {
        Files.setPosixFilePermissions(pathToFile(p).toPath(), bits);
      } catch (UnsupportedOperationException notPosix) {  // a file system without POSIX modes
        super.setPermission(p, permission);
      }
    }
  }
}
