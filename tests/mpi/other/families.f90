! A healthy Fortran MPI program (`use mpi`) on 4 ranks that makes the calls
! whose Fortran entry points hangtrace wraps: communicator creation and
! free, blocking and nonblocking collectives, a ring of nonblocking sends
! and receives completed by MPI_Waitall, MPI_Waitany (a wildcard receive,
! resolved at completion) and polled MPI_Testall, MPI_Sendrecv, MPI_Probe,
! persistent requests (MPI_Start, MPI_Startall), matched probes (MPI_Mprobe
! with MPI_Mrecv, polled MPI_Improbe with MPI_Imrecv), polled MPI_Iprobe,
! MPI_Comm_idup and MPI_Comm_create_group.
! Exits 0, or stops with the number of the check that failed.
program families
  use mpi
  implicit none
  integer :: rank, nranks, ierr, x, y, left, right, idx, sub, dup, msg, idup, grp, grpcomm
  integer :: reqs(2), preqs(2), st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2)
  ! Buffers of requests completed by a call that does not name them: the
  ! compiler must not keep them in registers across it.
  integer, volatile :: py, iy
  logical :: flag
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)
  x = rank
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, sub, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_set_name(dup, 'fortran dup', ierr)
  call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, sub, ierr)
  call MPI_Bcast(y, 1, MPI_INTEGER, 0, dup, ierr)
  call MPI_Iallreduce(x, y, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Wait(reqs(1), st, ierr)
  if (y /= nranks - 1) stop 1
  call MPI_Irecv(y, 1, MPI_INTEGER, left, 5, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(x, 1, MPI_INTEGER, right, 5, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, sts, ierr)
  if (y /= left) stop 2
  call MPI_Irecv(y, 1, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, reqs(1), ierr)
  call MPI_Isend(x, 1, MPI_INTEGER, right, 7, dup, reqs(2), ierr)
  call MPI_Waitany(2, reqs, idx, st, ierr)
  call MPI_Waitany(2, reqs, idx, st, ierr)
  if (y /= left) stop 3
  call MPI_Irecv(y, 1, MPI_INTEGER, left, 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(x, 1, MPI_INTEGER, right, 9, MPI_COMM_WORLD, reqs(2), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testall(2, reqs, flag, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_Sendrecv(x, 1, MPI_INTEGER, right, 11, y, 1, MPI_INTEGER, left, 11, MPI_COMM_WORLD, st, ierr)
  if (y /= left) stop 4
  call MPI_Isend(x, 1, MPI_INTEGER, right, 13, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Probe(left, 13, MPI_COMM_WORLD, st, ierr)
  call MPI_Recv(y, 1, MPI_INTEGER, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  ! Persistent requests, started by MPI_Start, then by MPI_Startall.
  call MPI_Send_init(x, 1, MPI_INTEGER, right, 15, MPI_COMM_WORLD, preqs(1), ierr)
  call MPI_Recv_init(py, 1, MPI_INTEGER, left, 15, MPI_COMM_WORLD, preqs(2), ierr)
  call MPI_Start(preqs(1), ierr)
  call MPI_Start(preqs(2), ierr)
  call MPI_Waitall(2, preqs, sts, ierr)
  if (py /= left) stop 5
  py = -1
  call MPI_Startall(2, preqs, ierr)
  call MPI_Waitall(2, preqs, sts, ierr)
  if (py /= left) stop 6
  call MPI_Request_free(preqs(1), ierr)
  call MPI_Request_free(preqs(2), ierr)
  ! Matched probes: MPI_Mprobe then MPI_Mrecv; polled MPI_Improbe then MPI_Imrecv.
  call MPI_Isend(x, 1, MPI_INTEGER, right, 17, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Mprobe(left, 17, MPI_COMM_WORLD, msg, st, ierr)
  y = -1
  call MPI_Mrecv(y, 1, MPI_INTEGER, msg, st, ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  if (y /= left) stop 7
  call MPI_Isend(x, 1, MPI_INTEGER, right, 19, MPI_COMM_WORLD, reqs(1), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Improbe(left, 19, MPI_COMM_WORLD, flag, msg, st, ierr)
  end do
  iy = -1
  call MPI_Imrecv(iy, 1, MPI_INTEGER, msg, reqs(2), ierr)
  call MPI_Waitall(2, reqs, sts, ierr)
  if (iy /= left) stop 8
  ! Polled MPI_Iprobe, then the receive.
  call MPI_Isend(x, 1, MPI_INTEGER, right, 21, MPI_COMM_WORLD, reqs(1), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Iprobe(left, 21, MPI_COMM_WORLD, flag, st, ierr)
  end do
  call MPI_Recv(y, 1, MPI_INTEGER, left, 21, MPI_COMM_WORLD, st, ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  ! Communicators made by MPI_Comm_idup and MPI_Comm_create_group, used.
  call MPI_Comm_idup(MPI_COMM_WORLD, idup, reqs(1), ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Comm_group(MPI_COMM_WORLD, grp, ierr)
  call MPI_Comm_create_group(MPI_COMM_WORLD, grp, 3, grpcomm, ierr)
  call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, grpcomm, ierr)
  if (y /= nranks * (nranks - 1) / 2) stop 9
  call MPI_Barrier(idup, ierr)
  call MPI_Group_free(grp, ierr)
  call MPI_Comm_free(grpcomm, ierr)
  call MPI_Comm_free(idup, ierr)
  call MPI_Comm_free(sub, ierr)
  call MPI_Comm_free(dup, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program families
